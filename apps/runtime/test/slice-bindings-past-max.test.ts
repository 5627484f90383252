// Past MAX_SLICE_BINDINGS a slice keeps the bindings of the files changed most recently. A load's
// binding beside others there drops the least recent file's binding (flushObjectStamps counts it,
// droppedBindings), and one that would rank last is not queued: its detail says so, instead of
// "bound now … being recorded" for a binding the store drops at once.
import { join } from 'node:path';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { MAX_SLICE_BINDINGS } from '@splitzip/store';
import { afterAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
/** A revision whose layer 0 is its own (seed), the rest shared. */
const revision = (seed: number): FixtureTensor[] =>
  Array.from({ length: 3 }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: k === 0 ? bf16Weights(4096, seed) : bf16Weights(4096, 100 + k) }));
const pause = () => new Promise((resolve) => setTimeout(resolve, 20)); // later files get later ctimes

it('a full slice: the least recent file gets no binding (detail says so, nothing recorded); the most recent binds, dropping one (droppedBindings)', async () => {
  const { dir, cleanup } = await makeTempDir('splitzip-past-max-');
  cleanups.push(cleanup);
  const old = await writeModel(join(dir, 'old'), revision(5000), 80 * 1024);
  await pause();
  const full: SafetensorsModel[] = [];
  for (let i = 1; i <= MAX_SLICE_BINDINGS; i++) {
    full.push(await writeModel(join(dir, `f${i}`), revision(5000 + i), 80 * 1024));
    await pause();
  }
  const latest = await writeModel(join(dir, 'latest'), revision(6000), 80 * 1024);
  cleanups.push(async () => {
    for (const model of [old, latest, ...full]) await model.close();
  });
  const cacheDir = join(dir, 'cache');
  for (const model of full) await buildCache(model, cacheDir, { sliceBindingsPerFile: true });
  await buildCache(old, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(0)] });
  await buildCache(latest, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(0)] });
  const slice = old.getTensor(name(0))!.slice;

  for (const [model, expected] of [
    [old, { recorded: 0, droppedBindings: 0, outrankedBindings: 0 }],
    [latest, { recorded: 1, droppedBindings: 1, outrankedBindings: 0 }],
  ] as const) {
    const raw = await readAllRaw(model);
    const cache = await openShardCache(cacheDir);
    try {
      expect(cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(MAX_SLICE_BINDINGS);
      const t = await loadTensor({ model, name: name(0) }, { cache, backend: 'cpu' });
      expect(sameBytes(t.data, raw.get(name(0))!)).toBe(true);
      expect(t.reason).toBe('stale');
      if (model === old) {
        expect(t.report.detail).toMatch(/but no binding of this file is added beside the slice's 8 \(MAX_SLICE_BINDINGS\): each is of a file changed more recently/);
        expect(t.report.detail).not.toMatch(/bound now/);
      } else {
        expect(t.report.detail).toMatch(/added beside the 8 bindings of other files .*so the binding of the file changed least recently is dropped .*: bound now/);
      }
      expect(await cache.flushObjectStamps!()).toMatchObject(expected);
    } finally {
      await cache.close();
    }
  }
  // The latest file's binding is kept (f1's went): a fresh handle serves it from the cache.
  const cache = await openShardCache(cacheDir);
  try {
    const t = await loadTensor({ model: latest, name: name(0) }, { cache, backend: 'cpu' });
    expect(t).toMatchObject({ source: 'cache', reason: 'cached' });
    const f1 = await loadTensor({ model: full[0]!, name: name(0) }, { cache, backend: 'cpu' });
    expect(f1.reason).toBe('stale');
  } finally {
    await cache.close();
  }
});
