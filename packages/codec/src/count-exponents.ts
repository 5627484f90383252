import { argumentTypeError } from './argument-type-error.js';
import { checkArenaView, kernelsFor } from './backend.js';
import { checkReadableView, isUint16Array, isUint32Array } from './typed-array-kind.js';
import { countExponentsJs } from './js/js-kernels.js';

/**
 * Below this many values countExponents keeps to the JS loop: the wasm path's fixed cost (clearing
 * and summing its four tables) makes the two about even at 512 values; wasm leads from 1,024
 * (bench/measure-count-exponents.mjs).
 */
export const WASM_COUNT_MIN_VALUES = 1024;

/**
 * Adds the 8-bit exponent histogram of BF16 bit patterns to `histogram` (256 counters, created if
 * absent) and returns it; call repeatedly to calibrate over several slices.
 */
export function countExponents(values: Uint16Array, histogram?: Uint32Array): Uint32Array {
  if (!isUint16Array(values)) {
    throw argumentTypeError('values', 'a Uint16Array of BF16 bit patterns', values);
  }
  // An unreadable view reads as empty: counting nothing would calibrate [0] at coverage 1.
  checkReadableView(values, 'values');
  const hist = histogram ?? new Uint32Array(256);
  if (!isUint32Array(hist) || hist.length !== 256) throw argumentTypeError('histogram', 'a Uint32Array of length 256', histogram);
  // The wasm kernel where it pays (an arena's own kernels for a view in a codec arena, in place);
  // both paths give the same counts, each bin mod 2^32 as a Uint32Array store wraps.
  checkArenaView(values, 'values');
  const kernels = values.length >= WASM_COUNT_MIN_VALUES ? kernelsFor(values, undefined, 'values') : null;
  if (kernels?.countExponents) kernels.countExponents(values, hist);
  else countExponentsJs(values, hist);
  return hist;
}
