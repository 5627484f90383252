import { SplitZipError } from './errors.js';

/**
 * Adds the 8-bit exponent histogram of BF16 bit patterns to `histogram` (256 counters, created if
 * absent) and returns it; call repeatedly to calibrate over several slices.
 */
export function countExponents(values: Uint16Array, histogram?: Uint32Array): Uint32Array {
  if (!(values instanceof Uint16Array)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'values must be a Uint16Array of BF16 bit patterns', {});
  }
  const hist = histogram ?? new Uint32Array(256);
  if (!(hist instanceof Uint32Array) || hist.length !== 256) {
    throw new SplitZipError('INVALID_ARGUMENT', 'histogram must be a Uint32Array of length 256', {});
  }
  // Two sub-histograms cut the store-to-load dependency when neighbours share an exponent.
  const a = new Uint32Array(256);
  const b = new Uint32Array(256);
  const n = values.length;
  const pairs = n & ~1;
  for (let i = 0; i < pairs; i += 2) {
    a[(values[i]! >>> 7) & 0xff]!++;
    b[(values[i + 1]! >>> 7) & 0xff]!++;
  }
  if (pairs < n) a[(values[pairs]! >>> 7) & 0xff]!++;
  for (let e = 0; e < 256; e++) hist[e] = hist[e]! + a[e]! + b[e]!;
  return hist;
}
