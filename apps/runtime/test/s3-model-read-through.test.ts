// An s3:// model through a read-through directory (the one the s3:// cache uses too): heads, index and
// uncached tensors kept on this host, verified, and never served for a replaced object.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { createBucket, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';

/** A gateway client that counts the commands it sends (by name); the model's source destroys it when the load ends. */
function countingClient(): { client: S3Client; counts: Map<string, number> } {
  const client = rawClient();
  const counts = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => (args) => {
      counts.set(context.commandName ?? '?', (counts.get(context.commandName ?? '?') ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'countCommands' },
  );
  return { client, counts };
}

async function rangeFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.startsWith('range.'));
}

describeS3('runtime: an s3:// model through a read-through directory', () => {
  const bucket = uniqueBucket('model-rt');
  const modelUrl = `s3://${bucket}/models/default`;
  const cacheUrl = `s3://${bucket}/cache`;
  let client: S3Client;
  let modelDir: string;
  let local: SafetensorsModel;
  let truth: Map<string, Uint8Array>;
  let shardCount: number;
  const temps: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'runtime-model-rt-'));
    temps.push(dir);
    return dir;
  };

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    modelDir = await ensureDefaultModel();
    await uploadDirectory(client, bucket, 'models/default/', modelDir);
    local = await openSafetensorsModel(modelDir);
    truth = await readAllRaw(local);
    shardCount = local.shards.length;
    await buildCache(local, cacheUrl);
  });
  afterAll(async () => {
    await local?.close();
    for (const dir of temps) await rm(dir, { recursive: true, force: true });
    await dropBucket(client, bucket);
    client.destroy();
  });

  /** One whole load of `url` with the cache and the model both using `readThroughDir`; the model's requests counted. */
  async function loadThrough(url: string, readThroughDir: string): Promise<{ tensors: Map<string, LoadedTensor>; counts: Map<string, number> }> {
    const counted = countingClient();
    const cache = await openShardCache(cacheUrl, { readThroughDir });
    try {
      const tensors = new Map<string, LoadedTensor>();
      for await (const tensor of loadModel(url, cache, { modelS3: { client: counted.client, readThroughDir } })) tensors.set(tensor.name, tensor);
      return { tensors, counts: counted.counts };
    } finally {
      await cache.close();
    }
  }

  const expectBitExact = (loaded: Map<string, LoadedTensor>, want = truth) => {
    expect(loaded.size).toBe(want.size);
    for (const [name, bytes] of want) expect(sameBytes(loaded.get(name)!.data, bytes), name).toBe(true);
  };

  it('the second load of an unchanged model sends the model one request, its LIST; both loads bit-exact', async () => {
    const readThroughDir = await tempDir();
    const first = await loadThrough(modelUrl, readThroughDir);
    expectBitExact(first.tensors);
    const raw = [...first.tensors.values()].filter((t) => t.source === 'raw');
    expect(raw.length).toBeGreaterThan(0);
    // One GET per head (index + shards) and per uncached tensor, each kept as one file.
    expect(first.counts.get('GetObjectCommand')).toBe(1 + shardCount + raw.length);
    expect(await rangeFiles(readThroughDir)).toHaveLength(1 + shardCount + raw.length);

    // The first load of the model's objects checked the cache's bindings against them (raw, then recorded).
    const unchecked = raw.filter((t) => t.reason === 'unchecked');
    expect(unchecked.length).toBeGreaterThan(0);

    const second = await loadThrough(modelUrl, readThroughDir);
    expectBitExact(second.tensors);
    expect(Object.fromEntries(second.counts)).toEqual({ ListObjectsV2Command: 1 });
    expect([...second.tensors.values()].filter((t) => t.source === 'raw').length).toBe(raw.length - unchecked.length);
    for (const t of unchecked) expect(second.tensors.get(t.name)?.reason, t.name).toBe('cached');
  });

  it('damaged local copies of model ranges are detected and fetched again, bit-exact', async () => {
    const readThroughDir = await tempDir();
    await loadThrough(modelUrl, readThroughDir);
    const files = await rangeFiles(readThroughDir);
    const damaged = files.slice(0, 5);
    for (const name of damaged) {
      const bytes = await readFile(join(readThroughDir, name));
      bytes[bytes.length - 1]! ^= 0x80;
      await writeFile(join(readThroughDir, name), bytes);
    }
    const again = await loadThrough(modelUrl, readThroughDir);
    expectBitExact(again.tensors);
    expect(again.counts.get('GetObjectCommand')).toBe(damaged.length);
    // Refetched copies replaced the damaged ones: the next load is local again.
    const third = await loadThrough(modelUrl, readThroughDir);
    expectBitExact(third.tensors);
    expect(Object.fromEntries(third.counts)).toEqual({ ListObjectsV2Command: 1 });
  });

  it('a shard replaced in S3 after the first load (same size, new ETag) is never served from its stale local copies', async () => {
    const prefix = 'models/replaced/';
    const url = `s3://${bucket}/models/replaced`;
    await uploadDirectory(client, bucket, prefix, modelDir);
    const readThroughDir = await tempDir();
    const first = await loadThrough(url, readThroughDir);
    expectBitExact(first.tensors);
    // A tensor the cache never serves (not BF16), changed in place: the shard keeps its size and header.
    const victim = local.tensors.find((t) => first.tensors.get(t.name)!.source === 'raw' && t.slice.sizeBytes >= 4)!;
    expect(victim).toBeDefined();
    const shardBytes = await readFile(victim.shardPath);
    for (let i = 0; i < victim.slice.sizeBytes; i++) shardBytes[victim.slice.offsetBytes + i]! ^= 0x5a;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${victim.slice.shardName}`, Body: shardBytes }));
    const changed = new Map(truth);
    changed.set(victim.name, shardBytes.subarray(victim.slice.offsetBytes, victim.slice.offsetBytes + victim.slice.sizeBytes));

    const second = await loadThrough(url, readThroughDir);
    expectBitExact(second.tensors, changed);
    // That shard's head and its uncached tensors came from S3 again; every other object's from disk.
    const rawInShard = local.tensors.filter((t) => t.slice.shardName === victim.slice.shardName && second.tensors.get(t.name)!.source === 'raw').length;
    expect(second.counts.get('GetObjectCommand')).toBe(1 + rawInShard);
  });

  it('an unwritable read-through directory (below a regular file) still loads bit-exact, twice', async () => {
    const base = await tempDir();
    await writeFile(join(base, 'file'), 'x');
    const readThroughDir = join(base, 'file', 'rt');
    for (let round = 0; round < 2; round++) {
      const load = await loadThrough(modelUrl, readThroughDir);
      expectBitExact(load.tensors);
      expect(load.counts.get('GetObjectCommand')).toBeGreaterThan(shardCount);
    }
  });
});
