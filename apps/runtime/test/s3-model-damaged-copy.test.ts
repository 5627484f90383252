// An s3:// model's bytes damaged in transit (right length, wrong bytes), or kept so in the
// read-through directory: a tensor bound to a cache entry is judged on bytes fetched once more,
// never on the copy's word; an index or header that fails is fetched again before the open fails.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel, readTensorBytes, type SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel, openModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { createBucket, damageCopy, damageFirstChunk, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';

/**
 * A gateway client whose GetObject bodies are damaged (one byte flipped) when `damage(key, range)`
 * says so; counts its GetObject commands.
 */
function damagingClient(damage: (key: string, range: string | undefined) => boolean): { client: S3Client; gets: () => number } {
  const client = rawClient();
  let gets = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName !== 'GetObjectCommand') return result;
      gets++;
      const input = args.input as { Key: string; Range?: string };
      const output = result.output as { Body?: Readable };
      if (output.Body === undefined || !damage(input.Key, input.Range)) return result;
      output.Body = damageFirstChunk(output.Body);
      return result;
    },
    { step: 'initialize', name: 'damageBodies' },
  );
  return { client, gets: () => gets };
}

describeS3('runtime: an s3:// model whose bytes were damaged in transit, with a read-through directory', () => {
  const bucket = uniqueBucket('model-dmg');
  const prefix = 'models/default/';
  const modelUrl = `s3://${bucket}/${prefix}`;
  let client: S3Client;
  let modelDir: string;
  let local: SafetensorsModel;
  let truth: Map<string, Uint8Array>;
  const temps: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'runtime-model-dmg-'));
    temps.push(dir);
    return dir;
  };
  let caches = 0;
  /** A cache of the local model: its bindings hold no object stamps, so every bound tensor is read raw and checked. */
  const freshCache = async () => {
    const url = `s3://${bucket}/cache-${caches++}`;
    await buildCache(local, url);
    return url;
  };

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    modelDir = await ensureDefaultModel();
    await uploadDirectory(client, bucket, prefix, modelDir);
    local = await openSafetensorsModel(modelDir);
    truth = await readAllRaw(local);
  });
  afterAll(async () => {
    await local?.close();
    for (const dir of temps) await rm(dir, { recursive: true, force: true });
    await dropBucket(client, bucket);
    client.destroy();
  });

  async function loadAll(cacheUrl: string, readThroughDir: string, modelClient: S3Client): Promise<Map<string, LoadedTensor>> {
    const cache = await openShardCache(cacheUrl);
    try {
      const tensors = new Map<string, LoadedTensor>();
      for await (const tensor of loadModel(modelUrl, cache, { verifyDigest: false, modelS3: { client: modelClient, readThroughDir } })) tensors.set(tensor.name, tensor);
      return tensors;
    } finally {
      await cache.close();
    }
  }

  /** Every tensor read through `readThroughDir` with a client that counts GETs: bit-exact, and how many GETs it took. */
  async function readThroughCopies(readThroughDir: string): Promise<number> {
    const counted = damagingClient(() => false);
    const model = await openModel(modelUrl, { s3: { client: counted.client }, readThroughDir });
    try {
      for (const info of model.tensors) expect(sameBytes(await readTensorBytes(model, info), truth.get(info.name)!), info.name).toBe(true);
    } finally {
      await model.close();
    }
    return counted.gets();
  }

  /** The model's tensors bound to an entry of `cacheUrl`. */
  async function boundTensors(cacheUrl: string) {
    const cache = await openShardCache(cacheUrl);
    const bound = new Set<string>();
    for (const entry of cache.store.entries()) for (const [shardName, offsetBytes] of entry.sliceKeys) bound.add(`${shardName}@${offsetBytes}`);
    await cache.close();
    return local.tensors.filter((info) => bound.has(`${info.slice.shardName}@${info.slice.offsetBytes}`));
  }

  const expectBitExactNeverStale = (loaded: Map<string, LoadedTensor>) => {
    expect(loaded.size).toBe(truth.size);
    for (const [name, bytes] of truth) {
      expect(sameBytes(loaded.get(name)!.data, bytes), name).toBe(true);
      expect(loaded.get(name)!.reason, name).not.toBe('stale');
    }
  };

  it('a damaged read-through copy of a bound tensor is dropped and fetched again: the entry’s bytes, and the copy healed', async () => {
    const readThroughDir = await tempDir();
    const cacheUrl = await freshCache();
    expect(await readThroughCopies(readThroughDir)).toBeGreaterThan(0); // fills the directory
    const damaged = await boundTensors(cacheUrl);
    expect(damaged.length).toBeGreaterThan(3);
    for (const info of damaged) await damageCopy(readThroughDir, truth.get(info.name)!, (body) => (body[body.length >> 1]! ^= 0xff));

    const loaded = await loadAll(cacheUrl, readThroughDir, rawClient());
    expectBitExactNeverStale(loaded);
    for (const info of damaged) expect(loaded.get(info.name)!.reason, info.name).toBe('unchecked');
    const healed = damaged.filter((info) => /copy was dropped and the range fetched again/.test(loaded.get(info.name)!.report.detail ?? ''));
    expect(healed.length).toBeGreaterThan(0);
    // The first copy found damaged made the load's other copies suspect (the same earlier load kept
    // them): those it had served (the index and heads at least) were dropped, and it fetched the
    // rest, keeping them. The next load fetches the dropped ones; then every copy holds fetched bytes.
    expect(await readThroughCopies(readThroughDir)).toBeGreaterThanOrEqual(local.shards.length + 1);
    expect(await readThroughCopies(readThroughDir)).toBe(0);
  });

  it('a GET body of a bound tensor damaged in transit is fetched again before it is judged, and the load keeps none of its ranges', async () => {
    const readThroughDir = await tempDir();
    const cacheUrl = await freshCache();
    const bound = await boundTensors(cacheUrl);
    const slices = new Set(bound.map((info) => `${prefix}${info.slice.shardName} bytes=${info.slice.offsetBytes}-${info.slice.offsetBytes + info.slice.sizeBytes - 1}`));
    const seen = new Set<string>();
    // Each bound tensor's first GET is damaged, the next one not (a flaky link).
    const damaging = damagingClient((key, range) => {
      const id = `${key} ${range}`;
      if (!slices.has(id) || seen.has(id)) return false;
      seen.add(id);
      return true;
    });
    const loaded = await loadAll(cacheUrl, readThroughDir, damaging.client);
    expect(seen.size).toBe(slices.size);
    expectBitExactNeverStale(loaded);
    for (const info of bound) expect(loaded.get(info.name)!.reason, info.name).toBe('unchecked');
    // A body damaged on the way was found: the load's other ranges came the same way and nothing
    // checks the raw ones, so it kept none (before 2026-12-06 it kept them all). The next load keeps them.
    expect(await readThroughCopies(readThroughDir)).toBe(local.shards.length + 1 + local.tensors.length);
    expect(await readThroughCopies(readThroughDir)).toBe(0);
  });

  it('a shard header whose kept copy does not parse is fetched again: the open succeeds, and the copy is healed', async () => {
    const readThroughDir = await tempDir();
    await readThroughCopies(readThroughDir);
    const shard = await readFile(join(modelDir, local.shards[0]!.name));
    const head = shard.subarray(0, Math.min(shard.length, 256 * 1024));
    // A NUL in the header's JSON: no header parses it.
    await damageCopy(readThroughDir, head, (body) => (body[12] = 0));
    // The open's ranges (every head, the index) dropped and fetched once more; its other copies (the
    // tensors', kept by the same earlier load) are suspect too: fetched, not served from them.
    expect(await readThroughCopies(readThroughDir)).toBe(local.shards.length + 1 + local.tensors.length);
    expect(await readThroughCopies(readThroughDir)).toBe(0);
  });

  it('an index whose kept copy is not the object (its MD5 ETag) is fetched again, though it parses', async () => {
    const readThroughDir = await tempDir();
    await readThroughCopies(readThroughDir);
    const indexName = (await readdir(modelDir)).find((name) => name.endsWith('.index.json'))!;
    const index = await readFile(join(modelDir, indexName));
    // One tensor's name changed by a letter: valid JSON naming a tensor no shard has (INDEX_TENSOR_UNLISTED before).
    const at = index.indexOf('"', index.indexOf('"weight_map"') + '"weight_map"'.length) + 3;
    await damageCopy(readThroughDir, index, (body) => (body[at] = body[at] === 0x7a ? 0x79 : 0x7a));
    // The index fetched; the open's other copies are suspect: the heads served before the index's
    // copy was found wrong are dropped (the next open fetches them), the rest and every tensor fetched now.
    const first = await readThroughCopies(readThroughDir);
    expect(first).toBeGreaterThanOrEqual(1 + local.tensors.length);
    expect(first + (await readThroughCopies(readThroughDir))).toBe(1 + local.shards.length + local.tensors.length);
    expect(await readThroughCopies(readThroughDir)).toBe(0);
  });
});
