// Byte and value counts at and beyond 2^32: a BF16 tensor of 2^31 values (4 GiB) built as an empty
// payload and showed 0 exponents in `stats` (`byteLength >>> 1` wraps to 0 at 2^32). A 4 GiB
// end-to-end build takes ~16 s and over 4 GB of RSS, too much for CI: these check the functions
// with a real 2^32-byte view instead, whose zero pages the kernel maps lazily (~50 MB of RSS).
import { MAX_RAW_BYTES } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { addExponentCounts, analyzeBf16Bytes, createExponentTotals, entropyOf } from '../src/analyze-model.js';
import { bf16ValueCount, viewBf16 } from '../src/tensor-tasks.js';

const FOUR_GIB = 2 ** 32;

describe('counts of tensors of 2^32 bytes and more', () => {
  it('halves byte counts on both sides of 2^32 and up to the store’s MAX_RAW_BYTES', () => {
    expect(bf16ValueCount(FOUR_GIB - 2)).toBe(2 ** 31 - 1);
    expect(bf16ValueCount(FOUR_GIB)).toBe(2 ** 31);
    expect(bf16ValueCount(FOUR_GIB + 2)).toBe(2 ** 31 + 1);
    expect(bf16ValueCount(MAX_RAW_BYTES)).toBe(2 ** 32 - 1);
  });

  it('views a 2^32-byte tensor as its 2^31 values, and stats counts its exponents', { timeout: 60_000 }, () => {
    const bytes = new Uint8Array(FOUR_GIB);
    expect(viewBf16(bytes).length).toBe(2 ** 31);
    expect(viewBf16(bytes.subarray(2)).length).toBe(2 ** 31 - 1);
    // All zeros: one exponent, full coverage, no escapes (before: 0 values and 0 exponents).
    const analysis = analyzeBf16Bytes(bytes, 1024);
    expect(analysis).toMatchObject({ elementCount: 2 ** 31, distinctExponents: 1, coverage: 1, escapeCount: 0, entropyBits: 0 });
    expect(analysis.histogram[0]).toBe(2 ** 31);
    expect(analysis.predictedBytes).toBeGreaterThan(1.5 * 2 ** 31);
  });

  it("sums a model's exponent counts past 2^32 (a Uint32Array wrapped them)", () => {
    const totals = createExponentTotals();
    const histogram = new Uint32Array(256);
    histogram[120] = 2 ** 32 - 1;
    histogram[121] = 2 ** 32 - 1;
    for (let tensor = 0; tensor < 3; tensor++) addExponentCounts(totals, histogram);
    expect(totals[120]).toBe(3 * (2 ** 32 - 1));
    // Two exponents of equal counts: one bit per value, however many values.
    expect(entropyOf(totals)).toBeCloseTo(1, 12);
  });
});
