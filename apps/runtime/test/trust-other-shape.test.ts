// A binding served unchecked (objectSources 'trust', or a stampless shard at a single binding with
// an object stamp) whose entry is of another shape than the tensor at its slice (another model's
// tensor there) is `stale`, unhashed, as without trust: not CACHE_ENTRY_MISMATCH, the error of a
// damaged cache, which failed the load. A binding trusted by its recorded stamp keeps that error.
import { join } from 'node:path';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, objectSource, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import { name, revisionA, stamplessSource, useCleanups } from './helpers/two-revisions.js';

const cleanups = useCleanups();
/** A with layer 2 of another shape (other bytes), at A's slice. */
const reshaped = (): FixtureTensor[] => revisionA().map((t, k) => (k === 2 ? { ...t, shape: [32, 128], data: bf16Weights(4096, 555) } : t));

async function setUp(stamps: 'file' | 'object') {
  const { dir, cleanup } = await makeTempDir('trust-other-shape-');
  cleanups.push(cleanup);
  const a = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const c = await writeModel(join(dir, 'C'), reshaped(), 80 * 1024);
  cleanups.push(() => a.close(), () => c.close());
  const cacheDir = join(dir, 'cache');
  // The cache's one binding of each slice: recorded from A's files, or from A's objects (an ETag).
  const built = stamps === 'file' ? a : await openSafetensorsModel({ source: await objectSource(join(dir, 'A'), '"a-etag"') });
  if (built !== a) cleanups.push(() => built.close());
  await buildCache(built, cacheDir, { sliceBindingsPerFile: true });
  expect(c.getTensor(name(2))!.slice).toEqual(a.getTensor(name(2))!.slice);
  return { dir, cacheDir, raw: await readAllRaw(c) };
}

for (const stamps of ['file', 'object'] as const) {
  for (const [label, source, objectSources] of [
    ['stampless, trust', 'stampless', 'trust'],
    ['stampless, check', 'stampless', 'check'],
    ['another object, trust', 'object', 'trust'],
  ] as const) {
    it(`a binding recorded from ${stamps}s, another shape at its slice (${label}): stale, bit-exact raw, never CACHE_ENTRY_MISMATCH`, async () => {
      const { dir, cacheDir, raw } = await setUp(stamps);
      const model = await openSafetensorsModel({ source: source === 'stampless' ? await stamplessSource(join(dir, 'C')) : await objectSource(join(dir, 'C'), '"c-etag"') });
      cleanups.push(() => model.close());
      const cache = await openShardCache(cacheDir, { objectSources });
      try {
        const t = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
        expect(sameBytes(t.data, raw.get(name(2))!)).toBe(true);
        expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(t.report.detail).toMatch(/another shape/);
        // The other tensors are A's bytes at A's bindings: served as before.
        const other = await loadTensor({ model, name: name(1) }, { cache, backend: 'cpu' });
        expect(sameBytes(other.data, raw.get(name(1))!)).toBe(true);
      } finally {
        await cache.close();
      }
    });
  }
}
