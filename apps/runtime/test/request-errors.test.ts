import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel, writeSafetensorsFile } from '@splitzip/safetensors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, writeModel, type FixtureTensor } from './fixtures.js';

// Errors a probe with hub-shaped models found unhelpful: TENSOR_NOT_FOUND named the folder of a
// model opened by its file path (which may hold other models' files), with no hint of the name
// meant; loadTensor refused a model location with only "got string"; and a coverage just under
// the gate printed as the gate (`coverage 0.9900 < gate 0.99`).
let temp: Awaited<ReturnType<typeof makeTempDir>>;
beforeAll(async () => {
  temp = await makeTempDir('request-errors');
});
afterAll(async () => temp?.cleanup());

const tensors: FixtureTensor[] = [
  { name: 'embed.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 1) },
  { name: 'lm_head.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 2) },
];

describe('TENSOR_NOT_FOUND', () => {
  it('names the file a single-file model was opened from, and the nearest tensor name', async () => {
    const file = join(temp.dir, 'single', 'model.safetensors');
    await mkdir(join(temp.dir, 'single'));
    await writeSafetensorsFile(file, tensors);
    const model = await openSafetensorsModel(file);
    try {
      const error = await loadTensor({ model, name: 'embed.weigth' }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'TENSOR_NOT_FOUND', details: { tensor: 'embed.weigth', modelPath: file, suggestion: 'embed.weight' } });
      expect((error as Error).message).toBe(`model ${file} has no tensor named embed.weigth: did you mean embed.weight?`);
      const far = await loadTensor({ model, name: 'something.else.entirely' }).catch((e: unknown) => e);
      expect((far as Error).message).toBe(`model ${file} has no tensor named something.else.entirely`);
    } finally {
      await model.close();
    }
  });

  it('names the index of a sharded model', async () => {
    const model = await writeModel(join(temp.dir, 'sharded'), tensors, 10_000);
    try {
      expect(model.indexPath).not.toBeNull();
      const error = await loadTensor({ model, name: 'lm_head.weights' }).catch((e: unknown) => e);
      expect((error as Error).message).toBe(`model ${model.indexPath} has no tensor named lm_head.weights: did you mean lm_head.weight?`);
    } finally {
      await model.close();
    }
  });
});

describe('a model location passed to loadTensor', () => {
  it('says to open it first (only loadModel takes a location)', async () => {
    const location = join(temp.dir, 'single', 'model.safetensors');
    const calls: [string, () => Promise<unknown>][] = [
      ['request.model', () => loadTensor({ model: location as never, name: 'embed.weight' })],
      ['request.model', () => loadTensor({ model: location as never, slice: { shardName: 'model.safetensors', offsetBytes: 0, sizeBytes: 2 } })],
      // The option is named as the request's field is: `options.model` (it said `model`).
      ['options.model', () => loadTensor({ shardName: 'model.safetensors', offsetBytes: 0, sizeBytes: 2 }, { model: location as never })],
    ];
    for (const [option, call] of calls) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option, type: 'string', location } });
      expect((error as Error).message).toMatch(new RegExp(`^${option.replace('.', '\\.')} must be an open model, got the location `));
      expect((error as Error).message).toContain(`must be an open model, got the location ${JSON.stringify(location)}: open it once with \`await openModel(${JSON.stringify(location)})\``);
    }
  });
});

describe('a coverage just under the gate', () => {
  it('prints rounded down, never as the gate', async () => {
    // 100,000 values, 1,001 of them outside the Top-16 exponents: coverage 0.98999, which 4 decimals printed as 0.9900.
    const values = new Uint16Array(100_000);
    for (let i = 0; i < values.length; i++) values[i] = ((i < 1001 ? 1 + (i % 90) : 100 + (i % 16)) << 7) | (i & 0x7f);
    const model = await writeModel(join(temp.dir, 'edge'), [{ name: 'edge.weight', dtype: 'BF16', shape: [100_000], data: new Uint8Array(values.buffer) }], 1_000_000);
    await buildCache(model, join(temp.dir, 'edge-cache'));
    const cache = await openShardCache(join(temp.dir, 'edge-cache'));
    try {
      const load = loadModel(model, cache);
      await load.drain();
      expect(load.reports[0]).toMatchObject({ reason: 'coverage', detail: 'coverage 0.989990 < gate 0.99' });
    } finally {
      await cache.close();
      await model.close();
    }
  });
});

describe('a request of no accepted shape, and cacheOnly without a cache', () => {
  it('INVALID_ARGUMENT shows what was received, and the missing model of a request by name', async () => {
    const model = await writeModel(join(temp.dir, 'shapes'), tensors);
    try {
      const byName = await loadTensor({ name: 'embed.weight' } as never, { model }).catch((error: unknown) => error);
      expect(byName).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'request', received: '{ name: string "embed.weight" }' } });
      expect((byName as Error).message).toContain('got { name: string "embed.weight" }: a request by name carries its model, { model, name }');
      const numbered = await loadTensor({ model, name: 5 } as never).catch((error: unknown) => error);
      expect((numbered as Error).message).toContain('got { model: ');
      expect((numbered as Error).message).toContain('name: 5 }: name must be a string');
      const text = await loadTensor('embed.weight' as never, { model }).catch((error: unknown) => error);
      expect(text).toMatchObject({ code: 'INVALID_ARGUMENT', details: { received: 'string "embed.weight"' } });
    } finally {
      await model.close();
    }
  });

  it('cacheOnly with no cache (absent or null) is INVALID_ARGUMENT at the call, not NOT_CACHED per tensor', async () => {
    const model = await writeModel(join(temp.dir, 'cache-only'), tensors);
    try {
      for (const cache of [undefined, null]) {
        const one = await loadTensor({ model, name: 'embed.weight' }, { cache, cacheOnly: true }).catch((error: unknown) => error);
        expect(one).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'cacheOnly' } });
        expect((one as Error).message).toContain('cacheOnly needs a cache');
        expect(() => loadModel(model, cache, { cacheOnly: true })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ option: 'cacheOnly' }) }));
      }
      // cacheOnly: false without a cache is a raw load, as before.
      expect((await loadTensor({ model, name: 'embed.weight' }, { cacheOnly: false })).source).toBe('raw');
    } finally {
      await model.close();
    }
  });
});
