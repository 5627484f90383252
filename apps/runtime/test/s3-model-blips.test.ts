// An s3:// model under a faulty path: one spurious 404 no longer ends a load (it is confirmed by a
// HeadObject first), a real deletion mid-load is still reported naming the shard, and raw tensors
// fetched by a load that found a body damaged on the way are not kept for later loads.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel, readTensorBytes, type SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isRuntimeError, loadModel, openModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { createBucket, damageFirstChunk, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';

/** A gateway client whose GetObject commands go through `intercept` first (which may throw, or change the reply); counts commands by name. */
function faultyClient(intercept: (input: { Key: string; Range?: string }) => Promise<'damage' | 'pass'>): { client: S3Client; counts: Map<string, number> } {
  const client = rawClient();
  const counts = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? '?';
      counts.set(command, (counts.get(command) ?? 0) + 1);
      if (command !== 'GetObjectCommand') return next(args);
      const verdict = await intercept(args.input as { Key: string; Range?: string });
      const result = await next(args);
      const output = result.output as { Body?: Readable };
      if (verdict !== 'damage' || output.Body === undefined) return result;
      output.Body = damageFirstChunk(output.Body);
      return result;
    },
    { step: 'initialize', name: 'faults' },
  );
  return { client, counts };
}

/** What the SDK throws for a GET answered 404 NoSuchKey. */
function notFound(): Error {
  return Object.assign(new Error('The specified key does not exist.'), { name: 'NoSuchKey', $metadata: { httpStatusCode: 404 } });
}

describeS3('runtime: an s3:// model through a path that fakes 404s and damages bodies', () => {
  const bucket = uniqueBucket('model-blip');
  let client: S3Client;
  let modelDir: string;
  let local: SafetensorsModel;
  let truth: Map<string, Uint8Array>;
  let cacheUrl: string;
  let models = 0;
  const temps: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'runtime-model-blip-'));
    temps.push(dir);
    return dir;
  };
  /** A fresh copy of the model below its own prefix: its s3:// URL and the prefix. */
  const uploadModel = async () => {
    const prefix = `models/m${models++}/`;
    await uploadDirectory(client, bucket, prefix, modelDir);
    return { url: `s3://${bucket}/${prefix}`, prefix };
  };

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    modelDir = await ensureDefaultModel();
    local = await openSafetensorsModel(modelDir);
    truth = await readAllRaw(local);
    // A cache with no entry: every tensor is read raw from the shards.
    cacheUrl = `s3://${bucket}/empty-cache`;
    await buildCache(local, cacheUrl, { skip: local.tensors.map((info) => info.name) });
  });
  afterAll(async () => {
    await local?.close();
    for (const dir of temps) await rm(dir, { recursive: true, force: true });
    await dropBucket(client, bucket);
    client.destroy();
  });

  async function loadAll(modelUrl: string, modelClient: S3Client, readThroughDir?: string): Promise<Map<string, LoadedTensor>> {
    const cache = await openShardCache(cacheUrl);
    try {
      const tensors = new Map<string, LoadedTensor>();
      for await (const tensor of loadModel(modelUrl, cache, { verifyDigest: false, modelS3: { client: modelClient, readThroughDir } })) tensors.set(tensor.name, tensor);
      return tensors;
    } finally {
      await cache.close();
    }
  }

  /** The ranged GET of a tensor (not a shard's head, which starts at 0). */
  const isTensorGet = (input: { Key: string; Range?: string }) => input.Key.endsWith('.safetensors') && input.Range !== undefined && !input.Range.startsWith('bytes=0-');

  it('one GET of a tensor answered 404 (the shard is there): confirmed by a HeadObject, read again; the load completes bit-exact', async () => {
    const { url } = await uploadModel();
    let faked = 0;
    const faulty = faultyClient(async (input) => {
      if (faked === 0 && isTensorGet(input)) {
        faked++;
        throw notFound();
      }
      return 'pass';
    });
    const loaded = await loadAll(url, faulty.client);
    expect(faked).toBe(1);
    expect(faulty.counts.get('HeadObjectCommand')).toBe(1);
    expect(loaded.size).toBe(truth.size);
    for (const [name, bytes] of truth) expect(sameBytes(loaded.get(name)!.data, bytes), name).toBe(true);
  });

  it('a shard really deleted mid-load still ends it: SHARD_READ_FAILED naming the shard, OBJECT_MISSING', async () => {
    const { url, prefix } = await uploadModel();
    let deleted: string | undefined;
    const faulty = faultyClient(async (input) => {
      if (deleted === undefined && isTensorGet(input)) {
        deleted = input.Key;
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: input.Key }));
      }
      return 'pass';
    });
    const error = await loadAll(url, faulty.client).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(deleted).toBeDefined();
    expect(isRuntimeError(error, 'SHARD_READ_FAILED')).toBe(true);
    const details = (error as { details: Record<string, unknown> }).details;
    expect(details).toMatchObject({ shard: deleted!.slice(prefix.length), causeCode: 'OBJECT_MISSING', retryable: false });
  });

  it('a raw tensor whose GET body was damaged in transit is not kept once the load found a damaged body (the index, by its MD5): the next load is bit-exact', async () => {
    const { url } = await uploadModel();
    const readThroughDir = await tempDir();
    const seen = new Set<string>();
    // The first GET of the index and of every tensor is damaged, the next not (a flaky link).
    const faulty = faultyClient(async (input) => {
      const id = `${input.Key} ${input.Range}`;
      if ((!input.Key.endsWith('.json') && !isTensorGet(input)) || seen.has(id)) return 'pass';
      seen.add(id);
      return 'damage';
    });
    const model = await openModel(url, { s3: { client: faulty.client }, readThroughDir });
    try {
      // Served as they came (nothing checks a raw range), but not kept.
      for (const info of model.tensors) await readTensorBytes(model, info);
    } finally {
      await model.close();
    }
    expect(seen.size).toBeGreaterThan(model.tensors.length);

    const clean = faultyClient(async () => 'pass');
    const loaded = await loadAll(url, clean.client, readThroughDir);
    expect(loaded.size).toBe(truth.size);
    for (const [name, bytes] of truth) expect(sameBytes(loaded.get(name)!.data, bytes), name).toBe(true);
  });
});
