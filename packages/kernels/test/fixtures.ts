// In-memory inputs, the same kinds the codec is tested with: every BF16 bit pattern, model-like
// weights, sizes that are not multiples of 2, 4 or the chunk size, escape-heavy data, empty.

/** xorshift32 stream: deterministic across runs and platforms. */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
}

/** All 65,536 BF16 bit patterns, in a shuffled order (so chunks mix exponents). */
export function allPatterns(seed = 7): Uint16Array {
  const values = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) values[i] = i;
  const random = createRandom(seed);
  for (let i = values.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = values[i]!;
    values[i] = values[j]!;
    values[j] = t;
  }
  return values;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Gaussian weights (std 0.02) as BF16 by truncation: the exponent histogram of a real layer. */
export function modelLikeValues(n: number, seed = 11): Uint16Array {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(random(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u)) * 0.02;
    const a = 2 * Math.PI * random();
    f32[0] = r * Math.cos(a);
    values[i] = u32[0]! >>> 16;
    if (i + 1 < n) {
      f32[0] = r * Math.sin(a);
      values[i + 1] = u32[0]! >>> 16;
    }
  }
  return values;
}

/** Uniformly random bit patterns: with a model-calibrated codebook most values escape. */
export function escapeHeavyValues(n: number, seed = 13): Uint16Array {
  const random = createRandom(seed);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) values[i] = Math.floor(random() * 65536);
  return values;
}

/** A quick model-like tensor of any size: tiled from a small model-like block, with a shifted seed per tile. */
export function largeModelLikeValues(n: number): Uint16Array {
  const block = modelLikeValues(1 << 20, 17);
  const values = new Uint16Array(n);
  for (let at = 0, k = 0; at < n; at += block.length, k++) {
    const part = block.subarray(0, Math.min(block.length, n - at));
    values.set(part, at);
    // Sprinkle a few rare exponents so every launch has escapes.
    for (let i = at + (k % 97); i < at + part.length; i += 4099) values[i] = (values[i]! & 0x807f) | ((250 - (k % 7)) << 7);
  }
  return values;
}
