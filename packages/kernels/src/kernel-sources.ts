// gpu.js kernel bodies, kept as source strings so no bundler or transpiler can rewrite what
// gpu.js parses. All arithmetic is on floats holding exact integers below 2^24: every backend
// (GL fragment shaders, WGSL f32, wasm f32x4) computes these exactly. Shifts are done as
// multiplications by exact powers of two and floor(), never as division (GPU division is
// approximate). Launches are sized so that every index stays below 2^24.

/**
 * One thread per value of a launch. Inputs:
 * - words[j]: values 2j and 2j+1 packed as codeByte | sm[2j] << 8 | sm[2j+1] << 16 (24 bits);
 * - escStart[k]: the launch's escape index, rebased to 0 at the launch's first chunk;
 * - escEntries[m]: escape m of the launch as position * 256 + exponent, sorted within a chunk;
 * - codebook[code]: the exponent of each code (16 entries).
 * Returns the BF16 bit pattern plus `bias` as an integer-valued float. With bias 2^23 the float's
 * low 16 mantissa bits ARE the pattern, so the host extracts values with an integer copy
 * (Uint16Array.set(Uint32Array)) instead of a float-to-integer conversion per value (measured
 * 15-30x faster here); with bias 0 a GPU consumer reads the plain integer value.
 */
export const DECODE_KERNEL_SOURCE = `function decodeBf16(words, escStart, escEntries, codebook, chunkSize, invChunkSize, bias) {
  const i = this.thread.x;
  const j = Math.floor(i * 0.5);
  const w = words[j];
  const r8 = Math.floor(w * 0.00390625);
  const b0 = w - r8 * 256;
  const b2 = Math.floor(r8 * 0.00390625);
  const b1 = r8 - b2 * 256;
  const codeHigh = Math.floor(b0 * 0.0625);
  let code = b0 - codeHigh * 16;
  let sm = b1;
  if (i - j * 2 > 0.5) {
    code = codeHigh;
    sm = b2;
  }
  let exponent = codebook[code];
  const c = Math.floor(i * invChunkSize);
  const first = escStart[c];
  const end = escStart[c + 1];
  if (end > first) {
    const key = (i - c * chunkSize) * 256;
    let lo = first;
    let hi = end;
    for (let step = 0; step < 17; step++) {
      if (lo < hi) {
        const mid = Math.floor((lo + hi) * 0.5);
        if (escEntries[mid] < key) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
    }
    if (lo < end) {
      const entry = escEntries[lo];
      if (entry >= key && entry < key + 256) {
        exponent = entry - key;
      }
    }
  }
  const sign = Math.floor(sm * 0.0078125);
  return sign * 32768 + exponent * 128 + (sm - sign * 128) + bias;
}`;

/**
 * One thread per pair of values (2j, 2j+1) of a launch. codeOfExponent[e] is the code of
 * exponent e, or 16 for an escape (whose code is written as 0). Returns
 * codeByte | sm[2j] << 8 | sm[2j+1] << 16; past `count` the missing value contributes zeros.
 */
export const ENCODE_PAIRS_KERNEL_SOURCE = `function encodePairs(values, codeOfExponent, count) {
  const i0 = this.thread.x * 2;
  const v0 = values[i0];
  const h0 = Math.floor(v0 * 0.0078125);
  const s0 = Math.floor(v0 * 0.000030517578125);
  const sm0 = s0 * 128 + (v0 - h0 * 128);
  let c0 = codeOfExponent[h0 - s0 * 256];
  if (c0 > 15.5) {
    c0 = 0;
  }
  let c1 = 0;
  let sm1 = 0;
  if (i0 + 1 < count) {
    const v1 = values[i0 + 1];
    const h1 = Math.floor(v1 * 0.0078125);
    const s1 = Math.floor(v1 * 0.000030517578125);
    sm1 = s1 * 128 + (v1 - h1 * 128);
    c1 = codeOfExponent[h1 - s1 * 256];
    if (c1 > 15.5) {
      c1 = 0;
    }
  }
  return c0 + c1 * 16 + sm0 * 256 + sm1 * 65536;
}`;

/** One thread per chunk of a launch: how many of its values are escapes. */
export const COUNT_ESCAPES_KERNEL_SOURCE = `function countEscapes(values, codeOfExponent, count, chunkSize) {
  const base = this.thread.x * chunkSize;
  let escapes = 0;
  for (let k = 0; k < chunkSize; k++) {
    const i = base + k;
    if (i < count) {
      const v = values[i];
      const h = Math.floor(v * 0.0078125);
      const s = Math.floor(v * 0.000030517578125);
      if (codeOfExponent[h - s * 256] > 15.5) {
        escapes = escapes + 1;
      }
    }
  }
  return escapes;
}`;

/** Values per launch: a multiple of the largest chunk size, and far below the 2^24 index limit. */
export const LAUNCH_MAX_ELEMENTS = 2 ** 22;
/** Added to each decoded value for host readback: 2^23, the float whose mantissa holds the value. */
export const READBACK_BIAS = 2 ** 23;
/** Binary-search steps in DECODE_KERNEL_SOURCE: ceil(log2(MAX_CHUNK_SIZE + 1)). */
export const ESCAPE_SEARCH_STEPS = 17;
