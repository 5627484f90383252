import { cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { S3_INLINE_PAYLOAD_MAX_BYTES } from '@splitzip/store';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isRuntimeError, loadModel, openModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { createBucket, describeS3, dropBucket, listKeys, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';

async function collect(load: AsyncIterable<LoadedTensor>): Promise<Map<string, LoadedTensor>> {
  const out = new Map<string, LoadedTensor>();
  for await (const tensor of load) out.set(tensor.name, tensor);
  return out;
}

describeS3('runtime from S3: the default model and its cache in a bucket', () => {
  const bucket = uniqueBucket('load');
  const modelUrl = `s3://${bucket}/models/default`;
  const cacheUrl = `s3://${bucket}/cache`;
  let client: S3Client;
  let local: SafetensorsModel;
  let truth: Map<string, Uint8Array>;
  let keys: Map<string, string>;
  let readThroughDir: string;

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    const modelDir = await ensureDefaultModel();
    await uploadDirectory(client, bucket, 'models/default/', modelDir);
    local = await openSafetensorsModel(modelDir);
    truth = await readAllRaw(local);
    // The cache is built into the bucket with the store + codec directly.
    keys = await buildCache(local, cacheUrl);
    readThroughDir = await mkdtemp(join(tmpdir(), 'runtime-s3-rt-'));
  });
  afterAll(async () => {
    await local?.close();
    await rm(readThroughDir, { recursive: true, force: true });
    await dropBucket(client, bucket);
    client.destroy();
  });

  const expectBitExact = (loaded: Map<string, LoadedTensor>) => {
    expect(loaded.size).toBe(local.tensors.length);
    for (const [name, bytes] of truth) {
      const tensor = loaded.get(name);
      expect(tensor, name).toBeDefined();
      expect(sameBytes(tensor!.data, bytes), `${name} (${tensor!.source})`).toBe(true);
    }
  };

  it('opens the s3:// model with the same tensors and slice identity as the local copy', async () => {
    const remote = await openModel(modelUrl);
    try {
      expect(remote.tensors.map((t) => [t.name, t.dtype, t.shape, t.slice])).toEqual(local.tensors.map((t) => [t.name, t.dtype, t.shape, t.slice]));
      expect(remote.indexPath).toBe(`${modelUrl}/model.safetensors.index.json`);
    } finally {
      await remote.close();
    }
  });

  it('loads the s3:// model with the s3:// cache bit-exact: its objects checked once (raw), then cached tensors decoded, the rest raw through ranged GETs', async () => {
    // The cache was built from the local copy: the first load checks each binding against the
    // model's objects (read raw, hashed) and records their ETags in the cache.
    const first = await openShardCache(cacheUrl);
    try {
      const checking = loadModel(modelUrl, first, { verifyDigest: true });
      const loaded = await collect(checking);
      expectBitExact(loaded);
      const unchecked = [...loaded.values()].filter((t) => t.reason === 'unchecked');
      expect(new Set(unchecked.map((t) => t.name))).toEqual(new Set(keys.keys()));
      for (const t of unchecked) expect(t.report.detail, t.name).toMatch(/being recorded with the binding/);
      expect(await first.flushObjectStamps!()).toMatchObject({ recorded: unchecked.length, failed: 0 });
      const slice = local.getTensor(unchecked[0]!.name)!.slice;
      expect(first.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.stamps.some((s) => s.startsWith('etag:'))).toBe(true);
    } finally {
      await first.close();
    }
    const cache = await openShardCache(cacheUrl);
    try {
      expect(cache.remote).toBe(true);
      const load = loadModel(modelUrl, cache, { verifyDigest: true });
      const loaded = await collect(load);
      expectBitExact(loaded);
      const cachedNames = [...loaded.values()].filter((t) => t.source === 'cache').map((t) => t.name);
      expect(new Set(cachedNames)).toEqual(new Set(keys.keys()));
      expect(load.totals.fromCache).toBeGreaterThan(0);
      expect(load.totals.fromRaw).toBeGreaterThan(0);
      expect(load.totals.fallbacks).toBe(0);
      expect(load.totals.readThrough).toBeUndefined(); // no readThroughDir
      // Bytes fetched: compressed blobs for cached tensors, exact slices for the rest.
      const rawTensors = [...loaded.values()].filter((t) => t.source === 'raw');
      expect(load.totals.bytesReadRaw).toBe(rawTensors.reduce((sum, t) => sum + t.report.sizeBytes, 0));
      expect(load.totals.bytesReadFromCache).toBeLessThan(
        [...loaded.values()].filter((t) => t.source === 'cache').reduce((sum, t) => sum + t.report.sizeBytes, 0),
      );
      for (const t of loaded.values()) expect(t.reason === 'cached' || t.reason === 'dtype' || t.reason === 'coverage', `${t.name} ${t.reason}`).toBe(true);
    } finally {
      await cache.close();
    }
  });

  it("a fine-tune in S3 with the base's shard names and layout, loaded against the base's s3:// cache: its changed tensor raw (stale), never the base's bytes, on every load and host", async () => {
    // The tuned copy: the base's files with one cached tensor's low mantissa bits changed in place.
    const tunedDir = await mkdtemp(join(tmpdir(), 'runtime-s3-tuned-'));
    try {
      const changed = local.tensors.find((t) => keys.has(t.name) && t.slice.sizeBytes >= 64)!;
      for (const name of await readdir(local.rootDir)) {
        if (!name.endsWith('.safetensors') && !name.endsWith('.json')) continue;
        const bytes = await readFile(join(local.rootDir, name));
        if (name === changed.slice.shardName) {
          const start = local.shards.find((shard) => shard.name === name)!.headerBytes + 8 + changed.slice.offsetBytes;
          for (let i = 0; i < 64; i += 2) bytes[start + i]! ^= 0x01; // little-endian BF16: the low byte is mantissa
        }
        await writeFile(join(tunedDir, name), bytes);
      }
      await uploadDirectory(client, bucket, 'models/tuned/', tunedDir);
      const tunedLocal = await openSafetensorsModel(tunedDir);
      const tunedTruth = await readAllRaw(tunedLocal);
      await tunedLocal.close();
      expect(sameBytes(tunedTruth.get(changed.name)!, truth.get(changed.name)!)).toBe(false);
      for (let round = 0; round < 2; round += 1) {
        const cache = await openShardCache(cacheUrl);
        try {
          const loaded = await collect(loadModel(`s3://${bucket}/models/tuned`, cache));
          for (const [name, bytes] of tunedTruth) expect(sameBytes(loaded.get(name)!.data, bytes), `${name} round ${round}`).toBe(true);
          expect(loaded.get(changed.name)).toMatchObject({ source: 'raw', reason: 'stale' });
          // Its other tensors are the base's bytes. Those in the changed shard (a new ETag) are checked
          // and recorded in the first round; the unchanged shards are the base's objects byte for byte
          // (the same ETag: cached once a load of the base recorded it). All cached in the second round.
          for (const name of keys.keys()) {
            if (name === changed.name) continue;
            const sameShard = local.getTensor(name)!.slice.shardName === changed.slice.shardName;
            const reason = loaded.get(name)?.reason;
            if (round === 1) expect(reason, name).toBe('cached');
            else if (sameShard) expect(reason, name).toBe('unchecked');
            else expect(['unchecked', 'cached'], name).toContain(reason);
          }
        } finally {
          await cache.close();
        }
      }
    } finally {
      await rm(tunedDir, { recursive: true, force: true });
    }
  });

  it('loads the s3:// model without a cache, and the local model with the s3:// cache, bit-exact: its files checked once per host (readThroughDir) or per handle', async () => {
    const rawLoad = loadModel(modelUrl, null);
    expectBitExact(await collect(rawLoad));
    expect(rawLoad.totals.fromRaw).toBe(local.tensors.length);
    const hostDir = await mkdtemp(join(tmpdir(), 'runtime-s3-host-'));
    try {
      // The bucket's bindings hold no file stamps: the local files are checked (read raw, hashed)
      // once, and their stamps kept on this host, in the handle and in its readThroughDir.
      const cache = await openShardCache(cacheUrl, { readThroughDir: hostDir });
      try {
        const first = loadModel(local, cache);
        const checked = await collect(first);
        expectBitExact(checked);
        expect(first.totals.fromCache).toBe(0);
        expect(first.totals.byReason.unchecked).toBe(keys.size);
        // A file stamp is this host's: the detail does not promise other hosts a record.
        for (const t of checked.values()) if (t.reason === 'unchecked') expect(t.report.detail, t.name).toMatch(/its stamp is being kept for this host \(other processes of this host trust it where the cache has a readThroughDir\)/);
        expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: keys.size, failed: 0 });
        const again = loadModel(local, cache);
        expectBitExact(await collect(again));
        expect(again.totals.fromCache).toBe(keys.size);
      } finally {
        await cache.close();
      }
      // Another process of this host (a new handle on the same directory) trusts them at once.
      const next = await openShardCache(cacheUrl, { readThroughDir: hostDir });
      try {
        const load = loadModel(local, next);
        expectBitExact(await collect(load));
        expect(load.totals.fromCache).toBe(keys.size);
      } finally {
        await next.close();
      }
      // Nothing went to the bucket: a handle without the directory (another host) checks again.
      const elsewhere = await openShardCache(cacheUrl);
      try {
        const load = loadModel(local, elsewhere);
        expectBitExact(await collect(load));
        expect(load.totals.byReason.unchecked).toBe(keys.size);
        // `fileSources: 'trust'`: served unchecked (right only for the files the cache was built from).
        const trusting = await openShardCache(cacheUrl, { fileSources: 'trust' });
        const trusted = loadModel(local, trusting);
        expectBitExact(await collect(trusted));
        expect(trusted.totals.fromCache).toBe(keys.size);
        await trusting.close();
      } finally {
        await elsewhere.close();
      }
    } finally {
      await rm(hostDir, { recursive: true, force: true });
    }
  });

  it("a local fine-tune with the base's shard names and layout, loaded against the base's s3:// cache: its changed tensor raw (stale), never the base's bytes", async () => {
    const tunedDir = await mkdtemp(join(tmpdir(), 'runtime-s3-local-tuned-'));
    try {
      await cp(local.rootDir, tunedDir, { recursive: true });
      // One cached tensor's values changed in place (same size: same header, same layout).
      const victim = local.tensors.find((t) => keys.has(t.name) && t.slice.sizeBytes >= 64)!;
      const shardPath = join(tunedDir, victim.slice.shardName);
      const shardBytes = await readFile(shardPath);
      const start = victim.slice.offsetBytes; // absolute in the file
      for (let i = 0; i < 32; i += 2) shardBytes[start + i]! ^= 0x01; // low mantissa bits: coverage unchanged
      await writeFile(shardPath, shardBytes);
      const tuned = await openSafetensorsModel(tunedDir);
      const cache = await openShardCache(cacheUrl);
      try {
        const tunedTruth = await readAllRaw(tuned);
        for (let round = 0; round < 2; round++) {
          const load = loadModel(tuned, cache);
          const loaded = await collect(load);
          for (const [name, bytes] of tunedTruth) expect(sameBytes(loaded.get(name)!.data, bytes), `${name} round ${round}`).toBe(true);
          expect(loaded.get(victim.name)!.report).toMatchObject({ source: 'raw', reason: 'stale' });
          expect(load.totals.fromCache).toBe(round === 0 ? 0 : keys.size - 1);
          await cache.flushObjectStamps!(); // the checked files' stamps, recorded in the background
        }
      } finally {
        await cache.close();
        await tuned.close();
      }
    } finally {
      await rm(tunedDir, { recursive: true, force: true });
    }
  });

  it('read-through directory: the second load serves blobs from local disk, a damaged local copy is refused and fetched again', async () => {
    const first = await openShardCache(cacheUrl, { readThroughDir });
    let fetchedBlobs: number;
    try {
      const load = loadModel(modelUrl, first);
      expectBitExact(await collect(load));
      // Payloads up to S3_INLINE_PAYLOAD_MAX_BYTES come inline with their entry objects: never fetched, never kept locally.
      fetchedBlobs = [...new Set(keys.values())].filter((key) => first.getEntry(key)!.compBytes > S3_INLINE_PAYLOAD_MAX_BYTES).length;
      // The load's own counts of the directory: every fetched blob missed, then was kept.
      expect(load.totals.readThrough).toEqual({ hits: 0, misses: fetchedBlobs, damaged: 0, written: fetchedBlobs, writeFailures: 0 });
      // A second load on the same handle counts only its own reads: all served from the copies.
      const again = loadModel(modelUrl, first);
      await again.drain();
      expect(again.totals.readThrough).toEqual({ hits: fetchedBlobs, misses: 0, damaged: 0, written: 0, writeFailures: 0 });
    } finally {
      await first.close();
    }
    expect(fetchedBlobs).toBeGreaterThan(0);
    // Blob copies are named <key>.<blob sha256>.bin; entry objects' copies object.<…>.bin.
    const localBlobs = (await readdir(readThroughDir)).filter((name) => name.endsWith('.bin') && !name.startsWith('object.'));
    expect(localBlobs.length).toBe(fetchedBlobs);
    // Damage a local copy: it must not be served, whether the store checks it (the 'cpu' backend)
    // or leaves the checksum to the decode (the thread decoder: the copy is dropped and the blob
    // read again, checked by the store). Either way the tensor still comes from the cache.
    for (const [i, backend] of (['cpu', 'threads'] as const).entries()) {
      const victim = join(readThroughDir, localBlobs[i]!);
      const good = await readFile(victim);
      const bytes = Uint8Array.from(good);
      bytes[bytes.length >> 1]! ^= 0x40;
      await writeFile(victim, bytes);
      const second = await openShardCache(cacheUrl, { readThroughDir });
      try {
        const load = loadModel(modelUrl, second, { backend });
        expectBitExact(await collect(load));
        expect(load.totals.fromCache, backend).toBe(keys.size);
        expect(load.totals.fallbacks, backend).toBe(0);
        // The damaged copy is seen and replaced, whichever of the two checks it.
        expect(load.totals.readThrough, backend).toMatchObject({ damaged: 1, written: 1, writeFailures: 0 });
      } finally {
        await second.close();
      }
      expect(Buffer.from(await readFile(victim)).equals(good), backend).toBe(true);
    }
  });

  it('cacheOnly: an uncached tensor is NOT_CACHED; a readThroughDir on a local cache is refused', async () => {
    const cache = await openShardCache(cacheUrl);
    try {
      const uncached = local.tensors.find((t) => !keys.has(t.name))!;
      await expect(loadModel(modelUrl, cache, { cacheOnly: true, filter: (t) => t.name === uncached.name }).drain()).rejects.toMatchObject({ code: 'NOT_CACHED' });
    } finally {
      await cache.close();
    }
    await expect(openShardCache(readThroughDir, { readThroughDir })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('a damaged blob object is never decoded: the tensor falls back to raw (reported), cacheOnly throws typed', async () => {
    // A blob read by GET (inline payloads, up to S3_INLINE_PAYLOAD_MAX_BYTES, are served from their checked entry objects).
    const blobKeys = (await listKeys(client, bucket, 'cache/blobs/')).filter((key) => key.endsWith('.bin'));
    const sizes = await Promise.all(blobKeys.map(async (key) => (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))).ContentLength ?? 0));
    const victimKey = blobKeys[sizes.findIndex((size) => size > S3_INLINE_PAYLOAD_MAX_BYTES)]!;
    expect(victimKey).toBeDefined();
    const contentKey = /blobs\/([0-9a-f]{40})\./.exec(victimKey)![1]!;
    const object = await client.send(new GetObjectCommand({ Bucket: bucket, Key: victimKey }));
    const bytes = new Uint8Array(await object.Body!.transformToByteArray());
    bytes[bytes.length - 3]! ^= 0x01;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: victimKey, Body: bytes }));
    const victims = [...keys].filter(([, key]) => key === contentKey).map(([name]) => name);
    expect(victims.length).toBeGreaterThan(0);

    const cache = await openShardCache(cacheUrl);
    try {
      const load = loadModel(modelUrl, cache);
      const loaded = await collect(load);
      expectBitExact(loaded);
      for (const name of victims) {
        const t = loaded.get(name)!;
        expect(t.source).toBe('raw');
        expect(t.reason).toBe('cache-failed');
        expect(t.report.error?.code).toBe('CACHE_READ_FAILED');
      }
      expect(load.totals.fallbacks).toBe(victims.length);
      const error = await loadModel(modelUrl, cache, { cacheOnly: true, filter: (t) => t.name === victims[0] })
        .drain()
        .catch((e: unknown) => e);
      expect(isRuntimeError(error, 'CACHE_READ_FAILED')).toBe(true);
      expect((error as { retryable: boolean }).retryable).toBe(false);
    } finally {
      await cache.close();
    }
  });
});
