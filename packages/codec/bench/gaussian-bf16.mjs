// The codec's built-in test tensor: the Gaussian BF16 values, the same for every bench and
// run; the demo (examples/demo.mjs) adds rare large outliers, like real weights.
/**
 * Deterministic Gaussian BF16 bit patterns (mulberry32 + Box-Muller, float32 rounded to nearest
 * even). With `outlierRate` > 0, that fraction of values is scaled by 500 (one more draw per value;
 * at 0 the stream is the benchmarks' own).
 */
export function gaussianBf16(n, sigma, seed, { outlierRate = 0 } = {}) {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    let x = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()) * sigma;
    if (outlierRate > 0 && rand() < outlierRate) x *= 500;
    f[0] = x;
    const bits = u[0];
    out[i] = (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return out;
}
