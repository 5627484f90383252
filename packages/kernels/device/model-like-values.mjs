// The device benches' test data: model-like BF16 weights (Gaussian, std 0.02), tiled from a 2^20
// block so that large sizes are quick to make, with rare exponents sprinkled in (escapes).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function modelLike(n) {
  const blockLength = Math.min(n, 1 << 20);
  const block = new Uint16Array(blockLength);
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
  for (let i = 0; i < blockLength; i++) {
    f32[0] = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd()) * 0.02;
    block[i] = u32[0] >>> 16;
  }
  const values = new Uint16Array(n);
  for (let at = 0, k = 0; at < n; at += blockLength, k++) {
    values.set(block.subarray(0, Math.min(blockLength, n - at)), at);
    for (let i = at + (k % 89); i < Math.min(n, at + blockLength); i += 5003) values[i] = (values[i] & 0x807f) | ((248 - (k % 5)) << 7);
  }
  return values;
}
