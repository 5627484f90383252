import { describeValue } from './describe-value.js';
import { MAX_CODEBOOK_SIZE } from './constants.js';
import { SplitZipError } from './errors.js';

/** A Top-16 exponent codebook: an exponent's position is its 4-bit code. Frozen. */
export interface Codebook {
  readonly exponents: readonly number[];
}

const validCodebooks = new WeakSet<Codebook>();

/** Validates 1..16 distinct integer exponents in 0..255 and returns a frozen codebook. */
export function createCodebook(exponents: readonly number[]): Codebook {
  if (!Array.isArray(exponents)) {
    throw new SplitZipError('INVALID_CODEBOOK', `codebook exponents must be an array, got ${describeValue(exponents)}`, { got: describeValue(exponents) });
  }
  if (exponents.length < 1 || exponents.length > MAX_CODEBOOK_SIZE) {
    throw new SplitZipError('INVALID_CODEBOOK', `codebook must hold 1..${MAX_CODEBOOK_SIZE} exponents`, {
      size: exponents.length,
    });
  }
  const seen = new Set<number>();
  for (let k = 0; k < exponents.length; k++) {
    const e: unknown = exponents[k];
    if (typeof e !== 'number' || !Number.isInteger(e) || e < 0 || e > 255) {
      throw new SplitZipError('INVALID_CODEBOOK', `codebook exponents must be integers in 0..255, got ${describeValue(e)} at ${k}`, {
        index: k,
        value: e,
      });
    }
    if (seen.has(e)) {
      throw new SplitZipError('INVALID_CODEBOOK', 'codebook exponents must be distinct', { index: k, value: e });
    }
    seen.add(e);
  }
  const codebook: Codebook = Object.freeze({ exponents: Object.freeze([...exponents]) });
  validCodebooks.add(codebook);
  return codebook;
}

/** Accepts codebooks made by createCodebook, or re-validates a look-alike object. */
export function ensureCodebook(codebook: Codebook): Codebook {
  if (codebook !== null && typeof codebook === 'object' && validCodebooks.has(codebook)) return codebook;
  if (codebook === null || typeof codebook !== 'object') {
    throw new SplitZipError('INVALID_CODEBOOK', `codebook must be an object with an exponents array, got ${describeValue(codebook)}`, { got: describeValue(codebook) });
  }
  return createCodebook(codebook.exponents);
}
