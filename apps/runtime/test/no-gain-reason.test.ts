import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// A BF16 tensor whose payload would not be smaller than its raw bytes (under ~1,400 values at any
// chunk size) is not stored by the builder (skipped_no_gain): a miss of one is `no-gain`, not
// `missing` (which named a build that would never cache it). Entries an older build stored for
// such tensors keep being served.
let fixture: CachedModelFixture;
beforeAll(async () => {
  // layer.0.attn.k (231 values) and layer.1.one (1 value) left out, as the builder leaves them;
  // layer.0.attn.q (1001 values, no gain either) stored, as a build before the rule stored it.
  fixture = await openCachedModel('no-gain-reason', undefined, { skip: ['layer.0.attn.k', 'layer.1.one'] });
});
afterAll(async () => {
  await fixture.close();
});

const NO_GAIN = /^its payload would be \d+ bytes, not smaller than its (462|2) raw bytes: the cache does not store tensors that would not shrink \(the build skips them as skipped_no_gain\)$/;

describe('a tensor too small to shrink', () => {
  it.each([true, false])('is `no-gain` with the payload and raw sizes (explainMisses %s: decided without its bytes); a stored one is served', async (explainMisses) => {
    const load = loadModel(fixture.model, fixture.cache, { explainMisses, filter: (t) => ['layer.0.attn.k', 'layer.1.one', 'layer.0.attn.q'].includes(t.name) });
    await load.drain();
    const byName = new Map(load.reports.map((r) => [r.name, r]));
    for (const name of ['layer.0.attn.k', 'layer.1.one']) {
      expect(byName.get(name)).toMatchObject({ source: 'raw', reason: 'no-gain' });
      expect(byName.get(name)!.detail).toMatch(NO_GAIN);
    }
    expect(byName.get('layer.0.attn.q')).toMatchObject({ source: 'cache', reason: 'cached' });
    expect(load.totals.byReason['no-gain']).toBe(2);
  });

  it('cacheOnly: NOT_CACHED with reason no-gain', async () => {
    const error = await loadTensor({ model: fixture.model, name: 'layer.0.attn.k' }, { cache: fixture.cache, cacheOnly: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: 'layer.0.attn.k', reason: 'no-gain' } });
  });
});
