// A load never moves a cache to manifest format 3 (which releases before 0.56 refuse): it binds a
// file's slice beside another file's binding only where the cache already holds a second binding of
// some slice (CacheStore.holdsSeveralBindings). In a cache of one binding per slice the tensor stays
// `stale`, its remedy the build that binds it beside (and what the cache then needs).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { afterAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
const revisionA = (): FixtureTensor[] => Array.from({ length: 4 }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 100 + k) }));
const revisionB = (): FixtureTensor[] => revisionA().map((t, k) => (k === 2 ? { ...t, data: bf16Weights(4096, 999) } : t));

async function manifestFormat(cacheDir: string): Promise<number> {
  return (JSON.parse(await readFile(join(cacheDir, 'manifest.json'), 'utf8')) as { format: number }).format;
}

async function storeHoldsSeveral(cacheDir: string): Promise<boolean> {
  const store = await openCacheStore(cacheDir);
  try {
    return store.holdsSeveralBindings;
  } finally {
    await store.close();
  }
}

it("B's entry held, its slice bound to A's: stale in a format-2 cache (no binding beside, format kept); bound beside once the cache holds a second binding", async () => {
  const { dir, cleanup } = await makeTempDir('splitzip-format-kept-');
  cleanups.push(cleanup);
  const A = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const B = await writeModel(join(dir, 'B'), revisionB(), 80 * 1024);
  cleanups.push(() => A.close(), () => B.close());
  const cacheDir = join(dir, 'cache');
  await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
  await buildCache(B, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(2)] });
  expect(await manifestFormat(cacheDir)).toBe(2);
  const raw = await readAllRaw(B);
  for (const round of [1, 2]) {
    const cache = await openShardCache(cacheDir);
    try {
      const t = await loadTensor({ model: B, name: name(2) }, { cache, backend: 'cpu' });
      expect(sameBytes(t.data, raw.get(name(2))!)).toBe(true);
      expect(t, `round ${round}`).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(t.report.detail).toMatch(/but a load adds no binding beside another file's to a cache holding one binding per slice .*: a build of this model binds its tensors beside the other files' \(the cache then needs 0\.56 or later\)/);
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0 });
    } finally {
      await cache.close();
    }
    expect(await storeHoldsSeveral(cacheDir)).toBe(false);
  }
  expect(await manifestFormat(cacheDir)).toBe(2);

  await holdSecondBinding(cacheDir);
  for (const expected of [{ source: 'raw', reason: 'stale' }, { source: 'cache', reason: 'cached' }]) {
    const cache = await openShardCache(cacheDir);
    try {
      const t = await loadTensor({ model: B, name: name(2) }, { cache, backend: 'cpu' });
      expect(sameBytes(t.data, raw.get(name(2))!)).toBe(true);
      expect(t).toMatchObject(expected);
      if (expected.reason === 'stale') expect(t.report.detail).toMatch(/binding of the slice is added beside .*: bound now/);
    } finally {
      await cache.close();
    }
  }
});
