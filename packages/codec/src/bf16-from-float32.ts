import { argumentTypeError } from './argument-type-error.js';
import { SplitZipError } from './errors.js';
import { typedArrayName } from './typed-array-kind.js';

/**
 * BF16 bit patterns of float32 values (the top 16 bits, rounded to nearest, ties to even), into
 * `out[0 .. values.length)` (allocated if absent) and returned as `out` itself. Infinities and
 * signed zeros are exact; a finite value past the largest BF16 rounds to infinity, as IEEE
 * rounding does; a NaN stays a NaN of its sign, made quiet (truncating a signalling NaN whose
 * payload sits in the low 16 bits would give an infinity). Pure JS, no allocation per value.
 */
export function bf16FromFloat32(values: Float32Array, out?: Uint16Array): Uint16Array {
  if (typedArrayName(values) !== 'Float32Array') throw argumentTypeError('values', 'a Float32Array', values);
  const target = out ?? new Uint16Array(values.length);
  if (typedArrayName(target) !== 'Uint16Array') throw argumentTypeError('out', 'a Uint16Array', out);
  if (target.length < values.length) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${target.length} values, ${values.length} needed`, { outLength: target.length, needed: values.length });
  }
  // The same bytes read as u32: a Float32Array's offset is always a multiple of 4.
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
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
