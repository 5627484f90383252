import { argumentTypeError } from './argument-type-error.js';
import { sharesBytes } from './check-overlap.js';
import { SplitZipError } from './errors.js';
import { checkReadableView, typedArrayName } from './typed-array-kind.js';

/**
 * BF16 bit patterns of float32 values (the top 16 bits, rounded to nearest, ties to even), into
 * `out[0 .. values.length)` (allocated if absent) and returned as `out` itself. Infinities and
 * signed zeros are exact; a finite value past the largest BF16 rounds to infinity, as IEEE
 * rounding does; a NaN stays a NaN of its sign, made quiet (truncating a signalling NaN whose
 * payload sits in the low 16 bits would give an infinity). Pure JS, no allocation per value.
 * `out` may share bytes with `values` (in place: the same start): each value is read before it is
 * overwritten, where needed from a copy of `values`. A view whose buffer was detached is INVALID_ARGUMENT.
 */
export function bf16FromFloat32(values: Float32Array, out?: Uint16Array): Uint16Array {
  if (typedArrayName(values) !== 'Float32Array') throw argumentTypeError('values', 'a Float32Array', values);
  checkReadableView(values, 'values');
  const target = out ?? new Uint16Array(values.length);
  if (typedArrayName(target) !== 'Uint16Array') throw argumentTypeError('out', 'a Uint16Array', out);
  checkReadableView(target, 'out');
  if (target.length < values.length) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${target.length} values, ${values.length} needed`, { outLength: target.length, needed: values.length });
  }
  // The same bytes read as u32: a Float32Array's offset is always a multiple of 4.
  let bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  // Forward, output i (2 bytes at out + 2i) lands on input bytes already read (from values + 4i)
  // while out starts at most 2 bytes after values; further on it would overwrite inputs yet to be
  // read (backward fails too, on the early ones), so those are read from a copy.
  if (target.byteOffset > values.byteOffset + 2 && sharesBytes(values, values.byteLength, target, values.length * 2)) bits = bits.slice();
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i]!;
    // NaN: exponent all ones and a non-zero mantissa. Keep sign and top mantissa bits, set the quiet bit.
    if ((x & 0x7fffffff) > 0x7f800000) target[i] = (x >>> 16) | 0x0040;
    // Round to nearest even: add half an ulp less one, plus the kept lowest bit. The sum stays
    // below 2^32 for every non-NaN (at most 0xff808000), so >>> does not wrap.
    else target[i] = (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return target;
}
