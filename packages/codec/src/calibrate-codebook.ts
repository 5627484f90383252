import { argumentTypeError } from './argument-type-error.js';
import { MAX_CODEBOOK_SIZE } from './constants.js';
import { isUint32Array } from './typed-array-kind.js';
import { countExponents } from './count-exponents.js';
import { createCodebook, type Codebook } from './create-codebook.js';

export interface CalibrationResult {
  codebook: Codebook;
  /** Fraction of values whose exponent is in the codebook (1 for an empty input). */
  coverage: number;
  /**
   * Values whose exponent is not in the codebook: pass it to `encode` (`{ escapeCount }`) so an
   * encode into a new payload skips its counting pass (exact, unlike `coverage x n`).
   */
  escapeCount: number;
}

/**
 * Top-16 codebook from an exponent histogram: descending count, ties by ascending exponent.
 * Exponents that never occur are left out; an all-zero histogram gives `[0]` (coverage 1).
 */
export function calibrateFromHistogram(histogram: Uint32Array): CalibrationResult {
  if (!isUint32Array(histogram) || histogram.length !== 256) {
    throw argumentTypeError('histogram', 'a Uint32Array of length 256', histogram);
  }
  const present: number[] = [];
  let total = 0;
  for (let e = 0; e < 256; e++) {
    const c = histogram[e]!;
    total += c;
    if (c > 0) present.push(e);
  }
  if (total === 0) return { codebook: createCodebook([0]), coverage: 1, escapeCount: 0 };
  present.sort((x, y) => histogram[y]! - histogram[x]! || x - y);
  const chosen = present.slice(0, MAX_CODEBOOK_SIZE);
  let covered = 0;
  for (const e of chosen) covered += histogram[e]!;
  return { codebook: createCodebook(chosen), coverage: covered / total, escapeCount: total - covered };
}

/** Calibrates a Top-16 exponent codebook on BF16 bit patterns. */
export function calibrateCodebook(values: Uint16Array): CalibrationResult {
  return calibrateFromHistogram(countExponents(values));
}
