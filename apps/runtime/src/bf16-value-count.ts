/**
 * The number of BF16 values in `byteLength` bytes (an odd last byte is no value). Arithmetic, not
 * `byteLength >>> 1`: a shift works on 32 bits, and a tensor of 2^31 values (4 GiB, Node 20's
 * largest buffer) counted 0 values, 4 GiB + 2 bytes one.
 */
export function bf16ValueCount(byteLength: number): number {
  return Math.floor(byteLength / 2);
}
