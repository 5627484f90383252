import { argumentTypeError } from './argument-type-error.js';
import { SplitZipError } from './errors.js';
import { typedArrayName } from './typed-array-kind.js';

/**
 * Float32 values of BF16 bit patterns (exact: a BF16 value is a float32 with its low 16 bits
 * zero, NaN payloads included), into `out[0 .. values.length)` (allocated if absent) and returned
 * as `out` itself. The inverse of `bf16FromFloat32` for every non-NaN pattern.
 */
export function float32FromBf16(values: Uint16Array, out?: Float32Array): Float32Array {
  if (typedArrayName(values) !== 'Uint16Array') throw argumentTypeError('values', 'a Uint16Array of BF16 bit patterns', values);
  const target = out ?? new Float32Array(values.length);
  if (typedArrayName(target) !== 'Float32Array') throw argumentTypeError('out', 'a Float32Array', out);
  if (target.length < values.length) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${target.length} values, ${values.length} needed`, { outLength: target.length, needed: values.length });
  }
  // Written as u32 so NaN bit patterns pass through unchanged (a float store may canonicalize them).
  const bits = new Uint32Array(target.buffer, target.byteOffset, values.length);
  for (let i = 0; i < values.length; i++) bits[i] = values[i]! << 16;
  return target;
}
