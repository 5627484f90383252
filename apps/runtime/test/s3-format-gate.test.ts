// A load's gate on binding beside other objects' bindings in an s3:// cache (FILE-BINDINGS.md phase 2)
// is cache.json's format, as the store's: format 2 stays 2 after an unbind or gc with no slice
// holding a second binding, and a load there still binds beside. A load never moves cache.json from
// format 1 to 2, through openShardCache or through a caller's store (wrapCacheStore) opened with
// sliceBindingsPerFile, also where another writer binds the slice between the load's look and its
// record; the report of such a record says it may be kept out (keptFormatBindings).
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore, type AliasSliceItem, type AliasSlicesOptions, type CacheStore } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel, openModel, openShardCache, wrapCacheStore, type LoadedTensor, type ShardCache } from '../src/index.js';
import { bf16Weights, buildCache, readAllRaw, sameBytes, writeModel } from './fixtures.js';
import { createBucket, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';
import { name, revisionA, useCleanups, writeRevisions } from './helpers/two-revisions.js';

describeS3('s3:// cache format gate of a load binding beside other objects', () => {
  const cleanups = useCleanups();
  const bucket = uniqueBucket('fmtgate');
  let client: S3Client;
  let urlB: string;
  let rawB: Map<string, Uint8Array>;
  let remoteA: SafetensorsModel;
  let remoteB: SafetensorsModel;
  let remoteC: SafetensorsModel;
  let remoteE: SafetensorsModel;
  let rawE: Map<string, Uint8Array>;

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    const { dir, B } = await writeRevisions('splitzip-s3-fmtgate-', cleanups);
    rawB = await readAllRaw(B);
    // C: A with layer 1 changed (its binding beside A's moves a cache to format 2).
    const C = await writeModel(`${dir}/C`, revisionA().map((t, k) => (k === 1 ? { ...t, data: bf16Weights(4096, 777) } : t)), 80 * 1024);
    cleanups.push(() => C.close());
    // E: A with layer 2 of another shape (its bytes, 32x128): another entry at A's slice.
    const E = await writeModel(`${dir}/E`, revisionA().map((t, k) => (k === 2 ? { ...t, shape: [32, 128] } : t)), 80 * 1024);
    cleanups.push(() => E.close());
    for (const r of ['A', 'B', 'C', 'E']) await uploadDirectory(client, bucket, `models/${r}/`, `${dir}/${r}`);
    urlB = `s3://${bucket}/models/B`;
    remoteA = await openModel(`s3://${bucket}/models/A`);
    remoteB = await openModel(urlB);
    remoteC = await openModel(`s3://${bucket}/models/C`);
    remoteE = await openModel(`s3://${bucket}/models/E`);
    cleanups.push(() => remoteA.close(), () => remoteB.close(), () => remoteC.close(), () => remoteE.close());
    rawE = await readAllRaw(remoteE);
  });
  afterAll(async () => {
    await dropBucket(client, bucket);
    client.destroy();
  });

  const cacheFormat = async (prefix: string): Promise<number> => {
    const reply = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}/cache.json` }));
    return (JSON.parse(await reply.Body!.transformToString()) as { format: number }).format;
  };
  const loadB = async (cache: ShardCache) => {
    const out = new Map<string, LoadedTensor>();
    for await (const tensor of loadModel(urlB, cache, { verifyDigest: true })) out.set(tensor.name, tensor);
    for (const [tensorName, bytes] of rawB) expect(sameBytes(out.get(tensorName)!.data, bytes), tensorName).toBe(true);
    return { tensors: out, stats: await cache.flushObjectStamps!() };
  };
  /** Binds A's layer 2 (A's ETag) through another handle: the writer that races the load's record. */
  const bindA2 = async (cacheUrl: string, keysA: Map<string, string>) => {
    const other = await openCacheStore(cacheUrl, { sliceBindingsPerFile: true });
    try {
      expect(await other.aliasSlices([{ key: keysA.get(name(2))!, ...remoteA.getTensor(name(2))!.slice, stamp: remoteA.shards[0]!.stamp! }])).toEqual([true]);
    } finally {
      await other.close();
    }
  };
  /** Calls `before` once, just before the store's first aliasSlices call (the load's record) goes on. */
  const raceFirstRecord = (store: CacheStore, before: () => Promise<void>): AliasSliceItem[][] => {
    const calls: AliasSliceItem[][] = [];
    const real = store.aliasSlices.bind(store);
    (store as { aliasSlices: CacheStore['aliasSlices'] }).aliasSlices = async (items: readonly AliasSliceItem[], options?: AliasSlicesOptions) => {
      if (calls.length === 0) await before();
      calls.push([...items]);
      return real(items, options);
    };
    return calls;
  };

  /** A, then C beside A at layer 1 (cache.json format 2), then C's binding unbound: format 2, no slice holding a second binding. */
  const formatTwoNoneHeld = async (prefix: string): Promise<string> => {
    const cacheUrl = `s3://${bucket}/${prefix}`;
    await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true });
    const keysC = await buildCache(remoteC, cacheUrl, { sliceBindingsPerFile: true });
    const store = await openCacheStore(cacheUrl, { sliceBindingsPerFile: true });
    try {
      expect(await store.unbindSlices([{ ...remoteC.getTensor(name(1))!.slice, key: keysC.get(name(1))! }])).toBe(1);
      expect(store.holdsSeveralBindings).toBe(false);
      expect((store as { layoutFormat?: number }).layoutFormat).toBe(2);
    } finally {
      await store.close();
    }
    expect(await cacheFormat(prefix)).toBe(2);
    return cacheUrl;
  };

  it("cache.json format 2 with no slice holding a second binding: E's tensor of another shape at a slice bound only to A's entry is found by content key and bound beside (missing once), then cached", async () => {
    const cacheUrl = await formatTwoNoneHeld('shape');
    await buildCache(remoteE, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(0), name(1), name(2), name(3)] });
    const reasons: string[] = [];
    for (let round = 0; round < 2; round++) {
      const cache = await openShardCache(cacheUrl);
      try {
        const out = new Map<string, LoadedTensor>();
        for await (const tensor of loadModel(remoteE, cache, { verifyDigest: true })) out.set(tensor.name, tensor);
        for (const [tensorName, bytes] of rawE) expect(sameBytes(out.get(tensorName)!.data, bytes), tensorName).toBe(true);
        await cache.flushObjectStamps!();
        reasons.push(out.get(name(2))!.reason);
      } finally {
        await cache.close();
      }
    }
    expect(reasons).toEqual(['missing', 'cached']);
    expect(await cacheFormat('shape')).toBe(2);
  });

  it('cache.json format 2 with no slice holding a second binding (C\'s unbound): B\'s changed tensor is bound beside A\'s (stale once), then cached', async () => {
    const prefix = 'unbound';
    const cacheUrl = await formatTwoNoneHeld(prefix);
    await buildCache(remoteB, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    const rounds: { reason: string; detail: string | undefined; keptFormatBindings: number }[] = [];
    for (let round = 0; round < 2; round++) {
      const cache = await openShardCache(cacheUrl);
      try {
        const { tensors, stats } = await loadB(cache);
        rounds.push({ reason: tensors.get(name(2))!.reason, detail: tensors.get(name(2))!.report.detail, keptFormatBindings: stats.keptFormatBindings });
      } finally {
        await cache.close();
      }
    }
    expect(rounds[0]!.reason).toBe('stale');
    expect(rounds[0]!.detail).toMatch(/to which this object's binding of the slice is added beside entry \w+'s binding of other objects .*: bound now/);
    expect(rounds[0]!.detail).not.toMatch(/format 1/);
    expect(rounds[0]!.keptFormatBindings).toBe(0);
    expect(rounds[1]!.reason).toBe('cached');
    expect(await cacheFormat(prefix)).toBe(2);
  });

  it("a load through wrapCacheStore of a store opened with sliceBindingsPerFile, another writer binding the slice to A before its record: the record carries besideOnlyIfSeveral and is kept out, cache.json stays format 1", async () => {
    const prefix = 'wrapped';
    const cacheUrl = `s3://${bucket}/${prefix}`;
    const keysA = await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    await buildCache(remoteB, cacheUrl, { noAlias: [name(0), name(1), name(2), name(3)] });
    expect(await cacheFormat(prefix)).toBe(1);
    const store = await openCacheStore(cacheUrl, { sliceBindingsPerFile: true });
    const calls = raceFirstRecord(store, () => bindA2(cacheUrl, keysA));
    const cache = wrapCacheStore(store);
    try {
      const { tensors, stats } = await loadB(cache);
      expect(tensors.get(name(2))!.reason).toBe('missing');
      expect(stats.keptFormatBindings).toBe(1);
    } finally {
      await cache.close();
    }
    expect(calls.flat().length).toBeGreaterThan(0);
    for (const item of calls.flat()) expect(item).toMatchObject({ moveFrom: item.key, besideOnlyIfSeveral: true });
    expect(await cacheFormat(prefix)).toBe(1);
  });

  it("the same race through openShardCache: the report's record text says a binding beside another object's is kept out at format 1 (keptFormatBindings), and it is", async () => {
    const prefix = 'raced';
    const cacheUrl = `s3://${bucket}/${prefix}`;
    const keysA = await buildCache(remoteA, cacheUrl, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    await buildCache(remoteB, cacheUrl, { noAlias: [name(0), name(1), name(2), name(3)] });
    const cache = await openShardCache(cacheUrl);
    raceFirstRecord(cache.store, () => bindA2(cacheUrl, keysA));
    try {
      const { tensors, stats } = await loadB(cache);
      expect(tensors.get(name(2))!.reason).toBe('missing');
      expect(tensors.get(name(2))!.report.detail).toMatch(/bound now: .*the binding is being recorded for other processes \(should another writer bind the slice to another object's entry before the record commits, this binding is added beside that one only if cache.json is format 2 by then, else not recorded, cache.json keeping format 1: flushObjectStamps' keptFormatBindings\)/);
      expect(stats.keptFormatBindings).toBe(1);
    } finally {
      await cache.close();
    }
    expect(await cacheFormat(prefix)).toBe(1);
  });
});
