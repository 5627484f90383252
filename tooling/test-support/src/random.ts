// Seeded randomness for test inputs: every suite uses the same generator so failures reproduce
// from the seed alone.

/** mulberry32: a tiny seeded PRNG, uniform in [0, 1). */
export function createRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Scratch view for the float32 → bits conversion, built once.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** BF16 bit pattern of a float (round to nearest even; fine for finite test data). */
export function toBf16(value: number): number {
  f32[0] = value;
  const bits = u32[0]!;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}
