import { DefaultModelError } from './errors.js';

/**
 * float32 bits -> bfloat16 bits, round to nearest, ties to even. Overflow rounds to +-infinity (the
 * carry runs into the exponent), subnormals round like any other value, the sign is kept. A NaN stays
 * a NaN: sign and the top 7 payload bits are kept and the quiet bit is set (so a signalling NaN whose
 * payload lies only in the low 16 bits cannot turn into infinity).
 */
export function float32BitsToBf16Bits(bits: number): number {
  const b = bits >>> 0;
  if ((b & 0x7fffffff) > 0x7f800000) return ((b >>> 16) | 0x0040) & 0xffff;
  // Adding 0x7fff plus the lowest kept bit rounds half to even; the sum stays below 2^32 for non-NaN.
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Converts little-endian float32 bytes to little-endian BF16 bytes. Works on the bit patterns only
 * (never through JS numbers, which may canonicalise NaN payloads).
 */
export function convertFloat32BytesToBf16(float32Bytes: Uint8Array, out?: Uint8Array): Uint8Array {
  if (!LITTLE_ENDIAN) throw new DefaultModelError('UNSUPPORTED_PLATFORM', 'big-endian hosts are not supported');
  if (float32Bytes.length % 4 !== 0) {
    throw new DefaultModelError('INVALID_OPTION', `float32 data has ${float32Bytes.length} bytes, not a multiple of 4`);
  }
  const count = float32Bytes.length / 4;
  const target = out ?? new Uint8Array(count * 2);
  if (target.length < count * 2) throw new DefaultModelError('INVALID_OPTION', `output holds ${target.length} bytes, needs ${count * 2}`);
  // Typed-array views need aligned offsets; copy only when the caller's views are unaligned.
  const src = float32Bytes.byteOffset % 4 === 0 ? new Uint32Array(float32Bytes.buffer, float32Bytes.byteOffset, count) : new Uint32Array(float32Bytes.slice().buffer);
  const aligned = target.byteOffset % 2 === 0;
  const dst = aligned ? new Uint16Array(target.buffer, target.byteOffset, count) : new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    const b = (src[i] as number) >>> 0;
    dst[i] = (b & 0x7fffffff) > 0x7f800000 ? (b >>> 16) | 0x0040 : (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  if (!aligned) target.set(new Uint8Array(dst.buffer), 0);
  return target.subarray(0, count * 2);
}
