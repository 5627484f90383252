import { describe, expect, it } from 'vitest';
import { calibrateCodebook, calibrateFromHistogram, countExponents, encode, readPayloadMeta, SplitZipError } from '../src/index.js';
import { allBf16Patterns, gaussianBf16, valuesWithExponents } from './reference.js';

const withExponent = (e: number, mantissa = 0): number => (e << 7) | mantissa;

describe('calibration', () => {
  it('orders by descending frequency, ties by ascending exponent', () => {
    // counts: 130 x3, 120 x3, 125 x1, 110 x3, 200 x2
    const exps = [130, 120, 125, 110, 200, 130, 120, 110, 200, 130, 120, 110];
    const values = Uint16Array.from(exps, (e, i) => withExponent(e, i & 0x7f) | (i & 1 ? 0x8000 : 0));
    const { codebook, coverage } = calibrateCodebook(values);
    expect(codebook.exponents).toEqual([110, 120, 130, 200, 125]);
    expect(coverage).toBe(1);
  });

  it('works with fewer than 16 distinct exponents', () => {
    const values = valuesWithExponents(1000, [3, 7], 1);
    const { codebook, coverage } = calibrateCodebook(values);
    expect([...codebook.exponents].sort((a, b) => a - b)).toEqual([3, 7]);
    expect(coverage).toBe(1);
  });

  it('gives [0] with coverage 1 for an empty input', () => {
    const { codebook, coverage } = calibrateCodebook(new Uint16Array(0));
    expect(codebook.exponents).toEqual([0]);
    expect(coverage).toBe(1);
    expect(calibrateFromHistogram(new Uint32Array(256))).toEqual({ codebook, coverage: 1, escapeCount: 0 });
  });

  it('keeps the top 16 and reports exact coverage', () => {
    // 20 exponents: exponent 100+k occurs 20-k times (k = 0..19) -> top 16 are 100..115.
    const list: number[] = [];
    for (let k = 0; k < 20; k++) for (let r = 0; r < 20 - k; r++) list.push(withExponent(100 + k));
    const values = Uint16Array.from(list);
    const { codebook, coverage } = calibrateCodebook(values);
    expect(codebook.exponents).toEqual(Array.from({ length: 16 }, (_, k) => 100 + k));
    const total = list.length; // 210
    const covered = total - (4 + 3 + 2 + 1);
    expect(coverage).toBe(covered / total);
    const fromHist = calibrateFromHistogram(countExponents(values));
    expect(fromHist.escapeCount).toBe(10);
    expect(fromHist.coverage).toBe(coverage);
  });

  it('reports the exact escape count, which encode takes as its hint (all 65,536 patterns, escape-heavy, empty)', () => {
    const cases = [allBf16Patterns(5), valuesWithExponents(5001, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20], 4), gaussianBf16(3001, 0.02, 6), new Uint16Array(0)];
    for (const values of cases) {
      const { codebook, escapeCount } = calibrateCodebook(values);
      const inBook = new Set(codebook.exponents);
      let outside = 0;
      for (let i = 0; i < values.length; i++) if (!inBook.has((values[i]! >>> 7) & 0xff)) outside++;
      expect(escapeCount, `n ${values.length}`).toBe(outside);
      const payload = encode(values, codebook, { escapeCount });
      expect(readPayloadMeta(payload).escapeCount).toBe(outside);
      expect(payload).toEqual(encode(values, codebook));
    }
  });

  it('covers Gaussian weights almost entirely with 16 exponents', () => {
    const { codebook, coverage } = calibrateCodebook(gaussianBf16(100_000, 0.02, 3));
    expect(codebook.exponents).toHaveLength(16);
    expect(coverage).toBeGreaterThan(0.999);
  });

  it('countExponents matches a scalar count at every alignment and length (views that start mid-word, odd tails)', () => {
    const all = allBf16Patterns(17);
    for (const start of [0, 1, 2, 3]) {
      for (const length of [0, 1, 2, 3, 4, 5, 7, 8, 9, 1001, all.length - start]) {
        const view = all.subarray(start, start + length);
        const expected = new Uint32Array(256);
        for (let i = 0; i < view.length; i++) expected[(view[i]! >>> 7) & 0xff]!++;
        expect(Array.from(countExponents(view)), `start ${start} length ${length}`).toEqual(Array.from(expected));
      }
    }
  });

  it('countExponents accumulates into a given histogram', () => {
    const a = Uint16Array.from([withExponent(5), withExponent(5), withExponent(9)]);
    const hist = countExponents(a);
    countExponents(Uint16Array.from([withExponent(9), 0x8000 | withExponent(255, 127)]), hist);
    expect(hist[5]).toBe(2);
    expect(hist[9]).toBe(2);
    expect(hist[255]).toBe(1);
    expect(hist.reduce((x, y) => x + y, 0)).toBe(5);
    expect(() => countExponents(a, new Uint32Array(255))).toThrow(SplitZipError);
    expect(() => countExponents([1] as unknown as Uint16Array)).toThrow(/INVALID_ARGUMENT/);
    expect(() => calibrateFromHistogram(new Uint32Array(3))).toThrow(/INVALID_ARGUMENT/);
  });
});
