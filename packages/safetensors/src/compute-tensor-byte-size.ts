import { checkDtypeArgument, checkShapeArgument } from './check-header-arguments.js';
import { DTYPE_BITS, type SafetensorsDtype } from './dtypes.js';

/**
 * Byte size of a tensor, with checked arithmetic:
 * - `{ byteSize }` when element count x bits is exact and fits a safe integer;
 * - `{ byteSize: undefined, reason: 'not-byte-aligned' }` when it is not a whole number of bytes;
 * - `{ byteSize: undefined, reason: 'overflow' }` when it exceeds Number.MAX_SAFE_INTEGER bytes.
 * INVALID_ARGUMENT for a shape that is not an array of at most MAX_TENSOR_RANK non-negative safe
 * integers, or a dtype not of SAFETENSORS_DTYPES (with the nearest name suggested).
 */
export type TensorByteSize =
  | { byteSize: number; reason?: undefined }
  | { byteSize: undefined; reason: 'not-byte-aligned' | 'overflow' };

const MAX_SAFE_BITS = BigInt(Number.MAX_SAFE_INTEGER) * 8n;

export function computeTensorByteSize(shape: readonly number[], dtype: SafetensorsDtype): TensorByteSize {
  checkShapeArgument(shape, 'shape');
  checkDtypeArgument(dtype, 'dtype');
  const bits = DTYPE_BITS[dtype];
  let count = 1;
  let overflowed = false;
  for (const dim of shape) {
    if (dim === 0) return { byteSize: 0 };
    // count * dim stays exact while it is <= MAX_SAFE_INTEGER; past that, switch to BigInt below.
    if (!overflowed && count > Math.floor(Number.MAX_SAFE_INTEGER / dim)) overflowed = true;
    if (!overflowed) count *= dim;
  }
  if (!overflowed && count <= Math.floor(Number.MAX_SAFE_INTEGER / bits)) {
    const totalBits = count * bits;
    if (totalBits % 8 !== 0) return { byteSize: undefined, reason: 'not-byte-aligned' };
    return { byteSize: totalBits / 8 };
  }
  // Slow path, only for absurd shapes: exact BigInt product (the rank is bounded by MAX_TENSOR_RANK).
  let totalBits = BigInt(bits);
  for (const dim of shape) totalBits *= BigInt(dim);
  if (totalBits % 8n !== 0n) return { byteSize: undefined, reason: 'not-byte-aligned' };
  if (totalBits > MAX_SAFE_BITS) return { byteSize: undefined, reason: 'overflow' };
  return { byteSize: Number(totalBits / 8n) };
}
