// The codec benchmarks' test tensor: the issue's Gaussian BF16 values, the same for every bench and run.
/** Deterministic Gaussian BF16 bit patterns (mulberry32 + Box-Muller, float32 rounded to nearest even). */
export function gaussianBf16(n, sigma, seed) {
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
    f[0] = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()) * sigma;
    const bits = u[0];
    out[i] = (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return out;
}
