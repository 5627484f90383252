import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { describeNoGain, formatCount } from '../src/check-payload-gain.js';
import { openCachedModel, standardTensors, type CachedModelFixture } from './fixtures.js';

// A BF16 tensor whose payload would not be smaller than its raw bytes (under 1,409 values at any
// chunk size, else for its escapes) is not stored by a build with --skip-no-gain (skipped_no_gain):
// a miss of one is `no-gain`, not `missing` (which named a build that would never cache it). Entries
// a default build stores for such tensors are served.
let fixture: CachedModelFixture;

/**
 * 1,500 values (a payload without escapes would shrink) over 16 exponents, and one value of a 17th:
 * coverage 1499/1500 passes the gate, but its one escape pads the payload past its 3,000 raw bytes.
 */
function oneEscapeTensor(): Uint8Array {
  const values = new Uint16Array(1500);
  for (let i = 0; i < values.length; i++) values[i] = ((112 + (i % 16)) << 7) | (i & 0x7f);
  values[values.length - 1] = (140 << 7) | 1;
  return new Uint8Array(values.buffer);
}

/** 768 values over 32 exponents (a bias of the default model's kind): coverage 0.5, under the gate, and too small to shrink. */
function lowCoverageTinyTensor(): Uint8Array {
  const values = new Uint16Array(768);
  for (let i = 0; i < values.length; i++) values[i] = ((100 + (i % 32)) << 7) | (i & 0x7f);
  return new Uint8Array(values.buffer);
}

beforeAll(async () => {
  // layer.0.attn.k (231 values), layer.1.one (1 value) and escaping (1,500 values, 1 escape) left
  // out, as a build --skip-no-gain leaves them; layer.0.attn.q (1001 values, no gain either) stored,
  // as a default build stores it.
  const tensors = [...standardTensors(), { name: 'layer.2.escaping', dtype: 'BF16' as const, shape: [1500], data: oneEscapeTensor() },
    { name: 'layer.2.lowcov', dtype: 'BF16' as const, shape: [768], data: lowCoverageTinyTensor() },
  ];
  fixture = await openCachedModel('no-gain-reason', tensors, { skip: ['layer.0.attn.k', 'layer.1.one', 'layer.2.escaping', 'layer.2.lowcov'] });
});
afterAll(async () => {
  await fixture.close();
});

// Sizes with thousands separators, as the builder's verify says them (a payload is over 1,000 bytes).
const NO_GAIN = /^would not shrink: its payload would be \d{1,3}(,\d{3})+ bytes, not smaller than its (462|2) raw bytes; a build with --skip-no-gain skips such tensors \(skipped_no_gain\), a build without it caches them if their coverage passes the gate$/;

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

  it('a tensor that would shrink but for its escapes: `no-gain` from the histogram pass (explainMisses), naming the escape count; `missing` without it', async () => {
    const explained = loadModel(fixture.model, fixture.cache, { filter: (t) => t.name === 'layer.2.escaping' });
    await explained.drain();
    expect(explained.reports[0]).toMatchObject({ source: 'raw', reason: 'no-gain' });
    expect(explained.reports[0]!.detail).toMatch(/^would not shrink: its payload would be \d{1,3}(,\d{3})+ bytes, not smaller than its 3,000 raw bytes \(1 escape\); a build with --skip-no-gain skips such tensors/);
    // Its size alone does not tell: without the histogram pass it is only not in the cache.
    const unexplained = loadModel(fixture.model, fixture.cache, { explainMisses: false, filter: (t) => t.name === 'layer.2.escaping' });
    await unexplained.drain();
    expect(unexplained.reports[0]).toMatchObject({ source: 'raw', reason: 'missing' });
  });

  it('one under the gate too: `coverage` where its bytes are at hand (as a default build, skipped_coverage, and verify name it), the no-gain fact a note; `no-gain` without them', async () => {
    const explained = loadModel(fixture.model, fixture.cache, { filter: (t) => t.name === 'layer.2.lowcov' });
    await explained.drain();
    expect(explained.reports[0]).toMatchObject({ source: 'raw', reason: 'coverage' });
    expect(explained.reports[0]!.detail).toMatch(/^coverage 0\.5(0*) < gate 0\.99 \(no build caches it\); it would not shrink: its payload would be \d{1,3}(,\d{3})+ bytes, not smaller than its 1,536 raw bytes; /);
    const unexplained = loadModel(fixture.model, fixture.cache, { explainMisses: false, filter: (t) => t.name === 'layer.2.lowcov' });
    await unexplained.drain();
    expect(unexplained.reports[0]).toMatchObject({ source: 'raw', reason: 'no-gain' });
    expect(unexplained.reports[0]!.detail).toMatch(/a build without it caches them if their coverage passes the gate$/);
  });

  it('cacheOnly: NOT_CACHED with reason no-gain', async () => {
    const error = await loadTensor({ model: fixture.model, name: 'layer.0.attn.k' }, { cache: fixture.cache, cacheOnly: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: 'layer.0.attn.k', reason: 'no-gain' } });
  });
});

describe('describeNoGain', () => {
  it("says sizes and counts as the builder's verify does: `1,024 bytes`, `(1,234 escapes)`, whatever the locale", () => {
    expect(describeNoGain(64, 0, 1024)).toBe(
      'would not shrink: its payload would be 1,024 bytes, not smaller than its 64 raw bytes; a build with --skip-no-gain skips such tensors (skipped_no_gain), a build without it caches them if their coverage passes the gate',
    );
    expect(describeNoGain(3000, 1, 1024)).toMatch(/ bytes, not smaller than its 3,000 raw bytes \(1 escape\); /);
    expect(describeNoGain(1_234_567 * 2, 1_234_567, 1024)).toMatch(/^would not shrink: its payload would be \d{1,3}(,\d{3})+ bytes, not smaller than its 2,469,134 raw bytes \(1,234,567 escapes\); /);
    expect([0, 999, 1000, 1234567, -1234, 2 ** 53 - 1].map(formatCount)).toEqual(['0', '999', '1,000', '1,234,567', '-1,234', '9,007,199,254,740,991']);
  });
});
