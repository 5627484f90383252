// Revisions of an s3:// model (same shard names, objects rewritten: other ETags) in one s3:// cache
// (FILE-BINDINGS.md, phase 2): openShardCache opens s3:// with one binding per file, so each
// revision's loads find the binding holding its object's ETag, and a load binds a revision's tensor
// beside another object's binding where cache.json is format 2 already; a format-1 cache is never
// moved to format 2 by a load (releases up to 0.56 refuse it), as a local cache keeps its format.
import { readdir, readFile } from 'node:fs/promises';
import { CompleteMultipartUploadCommand, CreateMultipartUploadCommand, GetObjectCommand, PutObjectCommand, UploadPartCommand, type S3Client } from '@aws-sdk/client-s3';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel, openModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { createBucket, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';
import { name, useCleanups, writeRevisions } from './helpers/two-revisions.js';

describeS3('s3:// revisions in one s3:// cache (one binding per file)', () => {
  const cleanups = useCleanups();
  const bucket = uniqueBucket('revs');
  let client: S3Client;
  let urlA: string;
  let urlB: string;
  let urlC: string;
  let rawA: Map<string, Uint8Array>;
  let rawB: Map<string, Uint8Array>;
  let remoteA: SafetensorsModel;
  let remoteB: SafetensorsModel;
  let remoteC: SafetensorsModel;
  let urlA2: string;

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    const { dir, A, B } = await writeRevisions('splitzip-s3-revs-', cleanups);
    rawA = await readAllRaw(A);
    rawB = await readAllRaw(B);
    // C: A with layer 1 changed (its binding beside A's moves a cache to format 2).
    const { writeModel, bf16Weights } = await import('./fixtures.js');
    const { revisionA } = await import('./helpers/two-revisions.js');
    const C = await writeModel(`${dir}/C`, revisionA().map((t, k) => (k === 1 ? { ...t, data: bf16Weights(4096, 777) } : t)), 80 * 1024);
    cleanups.push(() => C.close());
    // E: A with layer 2 of another shape (its bytes, 32x128): another entry at A's slice.
    const E = await writeModel(`${dir}/E`, revisionA().map((t, k) => (k === 2 ? { ...t, shape: [32, 128] } : t)), 80 * 1024);
    cleanups.push(() => E.close());
    expect(E.getTensor(name(2))!.slice).toEqual(A.getTensor(name(2))!.slice);
    await uploadDirectory(client, bucket, 'models/E/', `${dir}/E`);
    await uploadDirectory(client, bucket, 'models/A/', `${dir}/A`);
    await uploadDirectory(client, bucket, 'models/B/', `${dir}/B`);
    await uploadDirectory(client, bucket, 'models/C/', `${dir}/C`);
    [urlA, urlB, urlC] = ['A', 'B', 'C'].map((r) => `s3://${bucket}/models/${r}`) as [string, string, string];
    // A2: A's bytes, its shard uploaded in one multipart part: another ETag, which no binding holds.
    urlA2 = `s3://${bucket}/models/A2`;
    for (const file of await readdir(`${dir}/A`)) {
      const body = await readFile(`${dir}/A/${file}`);
      const Key = `models/A2/${file}`;
      if (!file.endsWith('.safetensors')) {
        await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: body }));
        continue;
      }
      const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key }));
      const { ETag } = await client.send(new UploadPartCommand({ Bucket: bucket, Key, UploadId, PartNumber: 1, Body: body }));
      await client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key, UploadId, MultipartUpload: { Parts: [{ ETag, PartNumber: 1 }] } }));
    }
    remoteA = await openModel(urlA);
    remoteB = await openModel(urlB);
    remoteC = await openModel(urlC);
    cleanups.push(() => remoteA.close(), () => remoteB.close(), () => remoteC.close());
    // One shard per revision, rewritten: other ETags, so no binding of A's holds B's stamp.
    expect(remoteA.shards[0]!.stamp).toMatch(/^etag:/);
    expect(remoteB.shards[0]!.stamp).not.toBe(remoteA.shards[0]!.stamp);
  });
  afterAll(async () => {
    await dropBucket(client, bucket);
    client.destroy();
  });

  const cacheFormat = async (prefix: string): Promise<number> => {
    const reply = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}/cache.json` }));
    return (JSON.parse(await reply.Body!.transformToString()) as { format: number }).format;
  };

  const loadAll = async (url: string, cacheUrl: string, raw: Map<string, Uint8Array>) => {
    const cache = await openShardCache(cacheUrl);
    try {
      const out = new Map<string, LoadedTensor>();
      for await (const tensor of loadModel(url, cache, { verifyDigest: true })) out.set(tensor.name, tensor);
      expect(out.size).toBe(raw.size);
      for (const [tensorName, bytes] of raw) expect(sameBytes(out.get(tensorName)!.data, bytes), tensorName).toBe(true);
      return { tensors: out, stats: await cache.flushObjectStamps!() };
    } finally {
      await cache.close();
    }
  };
  const reasons = (tensors: Map<string, LoadedTensor>) => Object.fromEntries([...tensors].map(([k, t]) => [k, t.reason]));
  const allCached = (n = 4) => Object.fromEntries(Array.from({ length: n }, (_, k) => [name(k), 'cached']));

  it('A and B both bound (format 2, through the store with their ETags): each revision loads every tensor from the cache, bit-exact, nothing recorded', async () => {
    const cacheUrl = `s3://${bucket}/both`;
    await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true });
    expect(await cacheFormat('both')).toBe(2);
    for (const [url, raw] of [[urlA, rawA], [urlB, rawB], [urlA, rawA]] as const) {
      const { tensors, stats } = await loadAll(url, cacheUrl, raw);
      expect(reasons(tensors), url).toEqual(allCached());
      expect(stats).toMatchObject({ recorded: 0, failed: 0 });
    }
  });

  it("objectSources 'trust', an object no binding has a record of (A's bytes, another ETag): a single binding served unchecked; at B's and A's bindings the bytes are checked once, the stamp recorded with A's binding below B's (the latest stays), then cached", async () => {
    const cacheUrl = `s3://${bucket}/trust`;
    const keysA = await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    const keysB = await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true });
    const a2 = await openModel(urlA2);
    cleanups.push(() => a2.close());
    expect(a2.shards[0]!.stamp).not.toBe(remoteA.shards[0]!.stamp);
    const slice = remoteA.getTensor(name(2))!.slice;
    const keysAt = async () => {
      const cache = await openShardCache(cacheUrl);
      try {
        return cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes).map((b) => b.entry.key);
      } finally {
        await cache.close();
      }
    };
    const before = await keysAt();
    expect(before).toEqual([keysB.get(name(2)), keysA.get(name(2))]);
    const trusted = async () => {
      const cache = await openShardCache(cacheUrl, { objectSources: 'trust' });
      try {
        const out = new Map<string, LoadedTensor>();
        for await (const tensor of loadModel(urlA2, cache, { verifyDigest: true })) out.set(tensor.name, tensor);
        for (const [tensorName, bytes] of rawA) expect(sameBytes(out.get(tensorName)!.data, bytes), tensorName).toBe(true);
        return { tensors: out, stats: await cache.flushObjectStamps!() };
      } finally {
        await cache.close();
      }
    };
    const first = await trusted();
    expect(reasons(first.tensors)).toEqual({ ...allCached(), [name(2)]: 'unchecked' });
    expect(first.stats).toMatchObject({ recorded: 1, failed: 0 });
    expect(await keysAt()).toEqual(before);
    expect(reasons((await trusted()).tensors)).toEqual(allCached());
    expect(reasons((await loadAll(urlB, cacheUrl, rawB)).tensors)).toEqual(allCached());
  });

  it("format 2: B's changed tensor, in the cache by content key but bound only for A, is bound beside A's by B's first load (stale once, as a local cache), then cached; A and C keep theirs", async () => {
    const cacheUrl = `s3://${bucket}/beside`;
    await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    // C's layer 1 beside A's: the cache holds a second binding (format 2).
    await buildCache(remoteC, cacheUrl, { sliceBindingsPerFile: true });
    // B's entries held, none of its slices bound for it.
    await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(0), name(1), name(2), name(3)] });
    expect(await cacheFormat('beside')).toBe(2);
    const first = await loadAll(urlB, cacheUrl, rawB);
    // Layers 0, 1, 3: A's bytes (layer 1: A's binding, below C's), checked once, B's ETag recorded.
    expect(reasons(first.tensors)).toEqual({ [name(0)]: 'unchecked', [name(1)]: 'unchecked', [name(2)]: 'stale', [name(3)]: 'unchecked' });
    expect(first.tensors.get(name(2))!.report.detail).toMatch(/to which this object's binding of the slice is added beside entry \w+'s binding of other objects .*: bound now/);
    expect(first.stats).toMatchObject({ recorded: 4, failed: 0, keptFormatBindings: 0 });
    const second = await loadAll(urlB, cacheUrl, rawB);
    expect(reasons(second.tensors)).toEqual(allCached());
    expect(second.stats).toMatchObject({ recorded: 0, failed: 0 });
    // A's and C's loads still find their own bindings (nothing moved above C's layer 1).
    expect(reasons((await loadAll(urlA, cacheUrl, rawA)).tensors)).toEqual(allCached());
    const rawC = await readAllRaw(remoteC);
    expect(reasons((await loadAll(urlC, cacheUrl, rawC)).tensors)).toEqual(allCached());
  });

  it("format 2: E's tensor of another shape at a slice bound only to A's entry: as unbound for this object, found by content key and bound beside (missing once, as a local cache), then cached; format 1: stale (shape) every load", async () => {
    const urlE = `s3://${bucket}/models/E`;
    const remoteE = await openModel(urlE);
    cleanups.push(() => remoteE.close());
    const rawE = await readAllRaw(remoteE);
    for (const [prefix, several] of [['shape2', true], ['shape1', false]] as const) {
      const cacheUrl = `s3://${bucket}/${prefix}`;
      await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
      if (several) await buildCache(remoteC, cacheUrl, { sliceBindingsPerFile: true });
      await buildCache(remoteE, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(0), name(1), name(2), name(3)] });
      expect(await cacheFormat(prefix)).toBe(several ? 2 : 1);
      const first = await loadAll(urlE, cacheUrl, rawE);
      expect(first.tensors.get(name(2)), prefix).toMatchObject({ source: 'raw', reason: several ? 'missing' : 'stale' });
      if (several) expect(first.tensors.get(name(2))!.report.detail).toMatch(/holds these bytes, but this slice was not bound to it.*: bound now/);
      const second = await loadAll(urlE, cacheUrl, rawE);
      expect(second.tensors.get(name(2))!.reason, prefix).toBe(several ? 'cached' : 'stale');
      expect(await cacheFormat(prefix)).toBe(several ? 2 : 1);
    }
    // A keeps its binding.
    expect(reasons((await loadAll(urlA, `s3://${bucket}/shape2`, rawA)).tensors)).toEqual(allCached());
  });

  it("format 1: B's changed tensor bound only for A stays stale at every load (no binding beside), cache.json stays format 1", async () => {
    const cacheUrl = `s3://${bucket}/one`;
    await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    expect(await cacheFormat('one')).toBe(1);
    for (const round of [1, 2]) {
      const { tensors, stats } = await loadAll(urlB, cacheUrl, rawB);
      expect(reasons(tensors), `round ${round}`).toEqual({ ...allCached(), [name(2)]: 'stale' });
      expect(tensors.get(name(2))!.report.detail).toMatch(/but a load adds no binding beside another object's to an s3:\/\/ cache whose cache.json is format 1 .*: a build of this s3:\/\/ model binds its tensors beside the other objects'/);
      expect(stats).toMatchObject({ recorded: 0, failed: 0 });
      expect(await cacheFormat('one')).toBe(1);
    }
  });

  it("ShardCache.aliasSlice, an explicit write as a build's: binds B's object beside A's binding and moves cache.json to format 2, where a load never does", async () => {
    const cacheUrl = `s3://${bucket}/explicit`;
    await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    const keysB = await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    expect(await cacheFormat('explicit')).toBe(1);
    const slice = remoteB.getTensor(name(2))!.slice;
    const cache = await openShardCache(cacheUrl);
    try {
      expect(await cache.aliasSlice(keysB.get(name(2))!, slice.shardName, slice.offsetBytes, slice.sizeBytes, remoteB.shards[0]!.stamp!)).toBe(true);
    } finally {
      await cache.close();
    }
    expect(await cacheFormat('explicit')).toBe(2);
    expect(reasons((await loadAll(urlB, cacheUrl, rawB)).tensors)).toEqual(allCached());
    expect(reasons((await loadAll(urlA, cacheUrl, rawA)).tensors)).toEqual(allCached());
  });
});
