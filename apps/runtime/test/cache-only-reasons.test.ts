import { createKernels } from '@splitzip/kernels/node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// cacheOnly's NOT_CACHED for a tensor without an entry. A normal load tells `coverage` (the build
// skipped it) from `missing` (not built) by a histogram of the raw bytes, and the cache records no
// skips: a cacheOnly load reads no raw bytes, so it cannot tell them apart. Its message said only
// "no entry for this slice"; it now says what each would mean, what to do, and how to find out.
let fixture: CachedModelFixture;
beforeAll(async () => {
  // layer.0.spread fails the coverage gate; lm_head is left out of the build; layer.0.norm is F32.
  fixture = await openCachedModel('cache-only-reasons', undefined, { skip: ['lm_head'] });
});
afterAll(async () => {
  await fixture.close();
});

const kernelsPromise = createKernels({ backend: 'cpu' });

async function notCached(name: string): Promise<(Error & { code: string; details: Record<string, unknown> })[]> {
  const { model, cache } = fixture;
  const kernels = await kernelsPromise;
  const errors = [
    await loadTensor({ model, name }, { cache, cacheOnly: true }).catch((error: unknown) => error),
    await loadTensorToDevice({ model, name }, { cache, cacheOnly: true, kernels }).catch((error: unknown) => error),
    await loadModel(model, cache, { cacheOnly: true, filter: (t) => t.name === name }).drain().catch((error: unknown) => error),
  ];
  return errors as never;
}

describe('cacheOnly: NOT_CACHED says why, and what to do', () => {
  it('a normal load tells coverage from missing (what cacheOnly cannot: it reads no raw bytes)', async () => {
    const load = loadModel(fixture.model, fixture.cache, { filter: (t) => t.name === 'layer.0.spread' || t.name === 'lm_head' });
    await load.drain();
    expect(load.reports.map((r) => [r.name, r.reason])).toEqual([
      ['layer.0.spread', 'coverage'],
      ['lm_head', 'missing'],
    ]);
  });

  it.each(['layer.0.spread', 'lm_head'])('%s (no entry, BF16): either the coverage gate or no build, the build that caches it, and that a load without cacheOnly tells which', async (name) => {
    for (const error of await notCached(name)) {
      expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: name, reason: 'missing' } });
      expect(error.message).toContain(`${name} is not in the cache (no entry for this slice: either the build skipped it for its Top-16 exponent coverage (under the gate ${fixture.cache.coverageMin}`);
      expect(error.message).toContain(`\`splitzip build <model> --out ${fixture.cache.root}\` does`);
      expect(error.message).toContain('a load without cacheOnly reports it as `coverage`, `no-gain` or `missing`');
    }
  });

  it('a tensor that is not BF16: reason dtype, and that no build makes it servable with cacheOnly', async () => {
    for (const error of await notCached('layer.0.norm')) {
      expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: 'layer.0.norm', reason: 'dtype' } });
      expect(error.message).toBe('layer.0.norm is not in the cache (dtype F32 is not BF16: only BF16 tensors are cached, so no build makes it servable with cacheOnly (leave it out, or load it without cacheOnly))');
    }
  });
});
