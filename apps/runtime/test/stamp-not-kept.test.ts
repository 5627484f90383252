// Past MAX_SLICE_STAMPS a binding keeps the stamps of the files changed most recently: a copy
// changed before all of them ranks last, and the store answers its record `true` keeping nothing.
// Its load must not say the stamp "is being recorded" (review of 4277873: every process was told
// so and hashed again), nor count it in flushObjectStamps().recorded: `notKept` counts it.
import { join } from 'node:path';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { MAX_SLICE_STAMPS } from '@splitzip/store';
import { afterAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, writeModel, type FixtureTensor } from './fixtures.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const NAME = 'layers.0.weight';
const TENSORS: FixtureTensor[] = [{ name: NAME, dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 4321) }];
const pause = () => new Promise((resolve) => setTimeout(resolve, 20)); // later copies get later ctimes

it('a copy changed before the 16 files whose stamps the binding keeps: detail says not recorded, notKept counts it, every process checks it', async () => {
  const { dir, cleanup } = await makeTempDir('splitzip-stamp-not-kept-');
  cleanups.push(cleanup);
  // Copy 0 first (the oldest ctime), then MAX_SLICE_STAMPS copies of the same bytes.
  const copies: SafetensorsModel[] = [];
  for (let i = 0; i <= MAX_SLICE_STAMPS; i++) {
    copies.push(await writeModel(join(dir, `copy${i}`), TENSORS, 80 * 1024));
    await pause();
  }
  cleanups.push(async () => {
    for (const model of copies) await model.close();
  });
  const cacheDir = join(dir, 'cache');
  await buildCache(copies[0]!, cacheDir);
  // Each newer copy's load records its stamp: the 17th pushes out copy 0's (its file changed first).
  for (const model of copies.slice(1)) {
    const cache = await openShardCache(cacheDir);
    try {
      expect((await loadTensor({ model, name: NAME }, { cache, backend: 'cpu' })).reason).toBe('unchecked');
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 1 });
    } finally {
      await cache.close();
    }
  }
  const slice = copies[0]!.getTensor(NAME)!.slice;
  for (let process = 0; process < 2; process++) {
    const cache = await openShardCache(cacheDir);
    try {
      expect(cache.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes)!.stamps).toHaveLength(MAX_SLICE_STAMPS);
      const t = await loadTensor({ model: copies[0]!, name: NAME }, { cache, backend: 'cpu' });
      expect(t.reason).toBe('unchecked'); // checked again by each new process: nothing was recorded
      expect(t.report.detail).toMatch(
        /its stamp is not recorded: its file changed before the 16 files whose stamps the binding keeps \(MAX_SLICE_STAMPS: the files changed most recently keep the slots\), so every new process checks it once; a cache of its own for these files avoids it/,
      );
      expect(t.report.detail).not.toMatch(/being recorded/);
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, notKept: 1, failed: 0 });
      // The handle keeps its check: a second load through it is served from the cache.
      expect((await loadTensor({ model: copies[0]!, name: NAME }, { cache, backend: 'cpu' })).source).toBe('cache');
    } finally {
      await cache.close();
    }
  }
});
