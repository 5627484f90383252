// Test data shared by the suites (uses src/, unlike reference.ts, the oracle).
import { calibrateCodebook } from '../src/index.js';
import { gaussianBf16, valuesWithExponents } from './reference.js';

/** Element-wise equality (typed arrays of different kinds, plain arrays). */
export function sameBytes(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Gaussian weights with every `escapeEvery`-th value replaced by one whose exponent (3, 200 or
 * 250) is outside the codebook, and that codebook: the calibrated one cut to `codebookSize`
 * entries (so the cut exponents escape too).
 */
export function weightsWithEscapes(n: number, seed: number, escapeEvery: number, codebookSize: number): { values: Uint16Array; exponents: number[] } {
  const values = gaussianBf16(n, 0.02, seed);
  // Calibrated on the weights alone, before the outliers go in: else 3, 200 and 250 (every
  // escapeEvery-th value) win codebook slots and never escape.
  const exponents = n === 0 ? [0] : calibrateCodebook(values).codebook.exponents.slice(0, codebookSize);
  const extra = valuesWithExponents(Math.min(n, 4096), [3, 200, 250], seed + 1);
  for (let i = 0; i < n; i += escapeEvery) values[i] = extra[i % extra.length]!;
  return { values, exponents };
}
