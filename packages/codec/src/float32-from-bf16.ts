import { argumentTypeError } from './argument-type-error.js';
import { sharesBytes } from './check-overlap.js';
import { SplitZipError } from './errors.js';
import { checkReadableView, typedArrayName } from './typed-array-kind.js';

/**
 * Float32 values of BF16 bit patterns (exact: a BF16 value is a float32 with its low 16 bits
 * zero, NaN payloads included), into `out[0 .. values.length)` (allocated if absent) and returned
 * as `out` itself. The inverse of `bf16FromFloat32` for every non-NaN pattern. `out` may share
 * bytes with `values` (in place: the same start): each pattern is read before it is overwritten,
 * where needed from a copy of `values`. A view whose buffer was detached is INVALID_ARGUMENT.
 */
export function float32FromBf16(values: Uint16Array, out?: Float32Array): Float32Array {
  if (typedArrayName(values) !== 'Uint16Array') throw argumentTypeError('values', 'a Uint16Array of BF16 bit patterns', values);
  checkReadableView(values, 'values');
  const target = out ?? new Float32Array(values.length);
  if (typedArrayName(target) !== 'Float32Array') throw argumentTypeError('out', 'a Float32Array', out);
  checkReadableView(target, 'out');
  if (target.length < values.length) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${target.length} values, ${values.length} needed`, { outLength: target.length, needed: values.length });
  }
  // Written as u32 so NaN bit patterns pass through unchanged (a float store may canonicalize them).
  const bits = new Uint32Array(target.buffer, target.byteOffset, values.length);
  const n = values.length;
  if (!sharesBytes(values, values.byteLength, target, n * 4)) {
    for (let i = 0; i < n; i++) bits[i] = values[i]! << 16;
  } else if (target.byteOffset + 2 >= values.byteOffset) {
    // Backward, output i (4 bytes at out + 4i) covers only inputs from i on (at values + 2i), all
    // read already, while out starts no more than 2 bytes before values: the same start included.
    // Forward would overwrite input i + 1 at its first step.
    for (let i = n - 1; i >= 0; i--) bits[i] = values[i]! << 16;
  } else {
    // Out starts further before values: each direction overwrites inputs yet to be read somewhere.
    const copy = values.slice();
    for (let i = 0; i < n; i++) bits[i] = copy[i]! << 16;
  }
  return target;
}
