// Identical tensors under several names of one model (per-layer norms of ones) share one cache
// entry, named after the first. Once their slice bindings are gone (gc --model of another model or
// revision of these shard names), a load finds each by content key: the tensor of the entry's name
// was bound again, the others were `missing` ('a build of this model binds it') and hashed at every
// load for good (review of afa2254). Now a load binds each such unbound slice too, as a build of the
// model does, where the model's tensor of the entry's name is bound to it by this file alone.
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import type { ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import type { SafetensorsModel } from '@splitzip/safetensors';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** The CPU decoder, counting content-key hashes (left to the runtime: undefined). */
function countingBackend(): { backend: DecodeBackend; hashes: () => number } {
  const cpu = createCpuDecoder();
  let hashes = 0;
  const backend: DecodeBackend = {
    name: 'counting',
    decode: (payload, meta, out, options) => cpu.decode(payload, meta, out, options),
    hashContentKey: () => {
      hashes += 1;
      return undefined;
    },
  };
  return { backend, hashes: () => hashes };
}

function ones(values: number): Uint8Array {
  return new Uint8Array(new Uint16Array(values).fill(0x3f80).buffer);
}

async function loadSources(model: SafetensorsModel, cache: ShardCache, backend: DecodeBackend): Promise<Record<string, string>> {
  const raw = await readAllRaw(model);
  const sources: Record<string, string> = {};
  for await (const tensor of loadModel(model, cache, { backend })) {
    expect(sameBytes(tensor.data, raw.get(tensor.name)!)).toBe(true);
    sources[tensor.name] = `${tensor.source}/${tensor.reason}`;
  }
  return sources;
}

it('four identical norms, their slices unbound: the first load binds all four, the next serves them cached, a new handle hashes none', async () => {
  const { dir, cleanup } = await makeTempDir('duplicate-tensors-bind');
  cleanups.push(cleanup);
  const norms = [0, 1, 2, 3].map((layer): FixtureTensor => ({ name: `layers.${layer}.norm.weight`, dtype: 'BF16', shape: [512], data: ones(512) }));
  const tensors: FixtureTensor[] = [{ name: 'w', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 5) }, ...norms];
  const model = await writeModel(join(dir, 'model'), tensors, 1 << 20);
  cleanups.push(() => model.close());
  // One entry (named layers.0.norm.weight) holds all four; none of their slices bound.
  await buildCache(model, join(dir, 'cache'), { noAlias: norms.map((norm) => norm.name) });
  const { backend, hashes } = countingBackend();

  const cache = await openShardCache(join(dir, 'cache'));
  const first = await loadSources(model, cache, backend);
  expect(hashes()).toBe(4);
  for (const norm of norms) expect(first[norm.name]).toBe('raw/missing');
  const load = loadModel(model, cache, { backend });
  await load.drain();
  for (const report of load.reports) expect(`${report.name}: ${report.source}/${report.reason}`).toBe(`${report.name}: cache/cached`);
  expect(hashes()).toBe(4);
  await cache.close(); // the bindings recorded

  const reopened = await openShardCache(join(dir, 'cache'));
  try {
    const third = await loadSources(model, reopened, backend);
    for (const norm of norms) expect(third[norm.name]).toBe('cache/cached');
    expect(hashes()).toBe(4);
  } finally {
    await reopened.close();
  }
});

it("not where the entry's own tensor is bound from another file of its shard name (another model's or revision's copy): left to a build", async () => {
  const { dir, cleanup } = await makeTempDir('duplicate-tensors-other-file');
  cleanups.push(cleanup);
  const norms = [0, 1].map((layer): FixtureTensor => ({ name: `layers.${layer}.norm.weight`, dtype: 'BF16', shape: [512], data: ones(512) }));
  const tensors: FixtureTensor[] = [{ name: 'w', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 6) }, ...norms];
  // Built from one copy (layers.0 bound with its stamps), loaded from another of the same layout.
  const builtFrom = await writeModel(join(dir, 'built-from'), tensors, 1 << 20);
  await buildCache(builtFrom, join(dir, 'cache'), { noAlias: ['layers.1.norm.weight'] });
  await builtFrom.close();
  const model = await writeModel(join(dir, 'model'), tensors, 1 << 20);
  cleanups.push(() => model.close());
  const { backend } = countingBackend();
  for (let load = 0; load < 2; load++) {
    const cache = await openShardCache(join(dir, 'cache'));
    try {
      const run = loadModel(model, cache, { backend });
      await run.drain();
      const report = run.reports.find((r) => r.name === 'layers.1.norm.weight')!;
      expect(`${report.source}/${report.reason}`).toBe('raw/missing');
      expect(report.detail).toMatch(/a build of this model binds it/);
    } finally {
      await cache.close(); // layers.0's stamp of this copy recorded beside the other's
    }
  }
});
