// A model handle used after its close(): every request fails with MODEL_CLOSED, before anything
// is served. A cached tensor was served from the cache through a closed handle (unchecked
// against its shard: rewritten since, the old bytes came back as `cache`), while a raw one failed
// SHARD_READ_FAILED with "model is closed" only in its message.
import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSafetensorsModel, type ByteSource } from '@splitzip/safetensors';
import { createFileReader } from '../src/create-file-reader.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, randomBytes, tunedWeights, writeModel, type FixtureTensor } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
let cache: ShardCache;
const tensors: FixtureTensor[] = [...tunedWeights(['a', 'b'], 71), { name: 'ids', dtype: 'I64', shape: [16], data: randomBytes(128, 72) }];

beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('closed-model'));
  const model = await writeModel(join(root, 'model'), tensors, 1 << 20);
  await buildCache(model, join(root, 'cache'));
  await model.close();
  cache = await openShardCache(join(root, 'cache'));
});
afterAll(async () => {
  await cache?.close();
  await cleanup?.();
});

const closedModel = expect.objectContaining({ code: 'MODEL_CLOSED' });

describe('a model handle after its close()', () => {
  it('loadTensor of a cached tensor, a raw one, by name or slice, and loadModel: MODEL_CLOSED, even after the shard was rewritten', async () => {
    const model = await openSafetensorsModel(join(root, 'model'));
    const cached = model.getTensor('a.weight')!;
    expect((await loadTensor({ model, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'cache', reason: 'cached' });
    await model.close();
    // Rewritten in place after the close: the handle must not serve the old bytes from the cache.
    const handle = await open(cached.shardPath, 'r+');
    await handle.write(new Uint8Array(cached.slice.sizeBytes).fill(0x3c), 0, cached.slice.sizeBytes, cached.slice.offsetBytes);
    await handle.close();
    await expect(loadTensor({ model, name: 'a.weight' }, { cache })).rejects.toEqual(closedModel);
    await expect(loadTensor({ model, name: 'a.weight' }, { cache, reader: createFileReader() })).rejects.toEqual(closedModel);
    await expect(loadTensor({ model, name: 'ids' }, { cache })).rejects.toEqual(closedModel);
    await expect(loadTensor({ model, name: 'ids' })).rejects.toEqual(closedModel);
    await expect(loadTensor({ model, slice: cached.slice }, { cache })).rejects.toEqual(closedModel);
    await expect(loadTensor(cached.slice, { cache, model })).rejects.toEqual(closedModel);
    await expect(loadModel(model, cache).drain()).rejects.toEqual(closedModel);
    await expect(loadModel(model, null).drain()).rejects.toEqual(closedModel);
    const error = await loadTensor({ model, name: 'a.weight' }, { cache }).catch((e: unknown) => e);
    expect(error).toMatchObject({ details: { tensor: 'a.weight', modelRoot: model.rootDir } });
  });

  it('closed during a load: the tensors started after the close are not served', async () => {
    // Tensors above LIGHT_TENSOR_MAX_BYTES: one at a time with concurrency 1 (the next starts as one ends).
    const large = [0, 1, 2, 3, 4, 5].map((k) => ({ name: `w${k}`, dtype: 'BF16' as const, shape: [40_000], data: bf16Weights(40_000, 80 + k) }));
    const written = await writeModel(join(root, 'large'), large, 1 << 20);
    await buildCache(written, join(root, 'large-cache'));
    await written.close();
    const model = await openSafetensorsModel(join(root, 'large'));
    const cache = await openShardCache(join(root, 'large-cache'));
    const served: string[] = [];
    const load = loadModel(model, cache, {
      concurrency: 1,
      onTensor: (t) => {
        served.push(t.name);
        if (served.length === 1) void model.close();
      },
    });
    await expect(load.drain()).rejects.toEqual(closedModel);
    // The one started before the close (and any finished meanwhile) came; the load ended with the error.
    expect(served.length).toBeGreaterThanOrEqual(1);
    expect(served.length).toBeLessThan(large.length);
    await cache.close();
  });

  it('a model read from a ByteSource (an s3:// model): MODEL_CLOSED for cached and raw tensors alike', async () => {
    const dir = join(root, 'model');
    const names = await readdir(dir);
    const source: ByteSource = {
      url: 's3://bucket/model/',
      list: async () => names,
      open: async (name) => {
        if (!names.includes(name)) return undefined;
        const bytes = await readFile(join(dir, name));
        return { sizeBytes: bytes.length, etag: '"0123"', readInto: async (offset: number, target: Uint8Array) => target.set(bytes.subarray(offset, offset + target.length)) };
      },
    };
    const model = await openSafetensorsModel({ source });
    // b.weight: the first test rewrote a.weight's bytes in the shard. An object's first load checks
    // its bytes against the binding (unchecked, raw); this handle then serves it from the cache.
    expect((await loadTensor({ model, name: 'b.weight' }, { cache })).report.reason).toBe('unchecked');
    expect((await loadTensor({ model, name: 'b.weight' }, { cache })).report.source).toBe('cache');
    await model.close();
    // Before model.closed, a cached tensor still came from the cache through the closed handle.
    await expect(loadTensor({ model, name: 'b.weight' }, { cache })).rejects.toEqual(closedModel);
    await expect(loadModel(model, cache).drain()).rejects.toEqual(closedModel);
    await expect(loadTensor({ model, name: 'ids' })).rejects.toEqual(closedModel);
    await expect(loadModel(model, null).drain()).rejects.toEqual(closedModel);
  });
});
