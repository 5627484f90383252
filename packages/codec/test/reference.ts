// The oracle: a plain scalar encoder, decoder and XXH32 written straight from FORMAT.md and the
// xxHash spec, sharing no code with src/. Slow on purpose; simple loops only.

export function referenceXxh32(bytes: Uint8Array, seed = 0): number {
  const P1 = 2654435761n;
  const P2 = 2246822519n;
  const P3 = 3266489917n;
  const P4 = 668265263n;
  const P5 = 374761393n;
  const M = 0xffffffffn;
  const rotl = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (32n - r))) & M;
  const u32 = (p: number): bigint =>
    BigInt(bytes[p]!) | (BigInt(bytes[p + 1]!) << 8n) | (BigInt(bytes[p + 2]!) << 16n) | (BigInt(bytes[p + 3]!) << 24n);
  const s = BigInt(seed);
  const len = bytes.length;
  let p = 0;
  let h: bigint;
  if (len >= 16) {
    const v = [(s + P1 + P2) & M, (s + P2) & M, s & M, (s - P1) & M];
    while (p + 16 <= len) {
      for (let k = 0; k < 4; k++) {
        v[k] = (rotl((v[k]! + u32(p) * P2) & M, 13n) * P1) & M;
        p += 4;
      }
    }
    h = (rotl(v[0]!, 1n) + rotl(v[1]!, 7n) + rotl(v[2]!, 12n) + rotl(v[3]!, 18n)) & M;
  } else {
    h = (s + P5) & M;
  }
  h = (h + BigInt(len)) & M;
  while (p + 4 <= len) {
    h = (rotl((h + u32(p) * P3) & M, 17n) * P4) & M;
    p += 4;
  }
  while (p < len) {
    h = (rotl((h + BigInt(bytes[p]!) * P5) & M, 11n) * P1) & M;
    p++;
  }
  h ^= h >> 15n;
  h = (h * P2) & M;
  h ^= h >> 13n;
  h = (h * P3) & M;
  h ^= h >> 16n;
  return Number(h);
}

/** The same XXH32 with 32-bit integer math (fast enough for the sweeps); cross-checked against the BigInt one. */
export function scalarXxh32(bytes: Uint8Array, seed = 0): number {
  const P1 = 0x9e3779b1 | 0;
  const P2 = 0x85ebca77 | 0;
  const P3 = 0xc2b2ae3d | 0;
  const P4 = 0x27d4eb2f | 0;
  const P5 = 0x165667b1 | 0;
  const rotl = (x: number, r: number): number => (x << r) | (x >>> (32 - r));
  const u32 = (p: number): number => bytes[p]! | (bytes[p + 1]! << 8) | (bytes[p + 2]! << 16) | (bytes[p + 3]! << 24);
  const len = bytes.length;
  let p = 0;
  let h: number;
  if (len >= 16) {
    let v1 = (seed + P1 + P2) | 0;
    let v2 = (seed + P2) | 0;
    let v3 = seed | 0;
    let v4 = (seed - P1) | 0;
    for (; p + 16 <= len; p += 16) {
      v1 = Math.imul(rotl((v1 + Math.imul(u32(p), P2)) | 0, 13), P1);
      v2 = Math.imul(rotl((v2 + Math.imul(u32(p + 4), P2)) | 0, 13), P1);
      v3 = Math.imul(rotl((v3 + Math.imul(u32(p + 8), P2)) | 0, 13), P1);
      v4 = Math.imul(rotl((v4 + Math.imul(u32(p + 12), P2)) | 0, 13), P1);
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    h = (seed + P5) | 0;
  }
  h = (h + len) | 0;
  for (; p + 4 <= len; p += 4) h = Math.imul(rotl((h + Math.imul(u32(p), P3)) | 0, 17), P4);
  for (; p < len; p++) h = Math.imul(rotl((h + Math.imul(bytes[p]!, P5)) | 0, 11), P1);
  h ^= h >>> 15;
  h = Math.imul(h, P2);
  h ^= h >>> 13;
  h = Math.imul(h, P3);
  h ^= h >>> 16;
  return h >>> 0;
}

const align = (x: number): number => Math.ceil(x / 256) * 256;

export function referenceLayout(n: number, escapes: number, chunkSize: number) {
  const chunkCount = Math.ceil(n / chunkSize);
  const a1 = 256;
  const a2 = align(a1 + Math.ceil(n / 2));
  const a3 = align(a2 + n);
  const a4 = align(a3 + 4 * (chunkCount + 1));
  const a5 = align(a4 + 2 * escapes);
  const total = align(a5 + escapes);
  return { chunkCount, a1, a2, a3, a4, a5, total };
}

/** Encodes as FORMAT.md says, in format `version` (3, the current one, unless asked for 1 or 2). */
export function referenceEncode(values: Uint16Array, exponents: readonly number[], chunkSize = 1024, version: 1 | 2 | 3 = 3): Uint8Array {
  const n = values.length;
  const codeOf = new Map<number, number>();
  exponents.forEach((e, k) => codeOf.set(e, k));
  let escapes = 0;
  for (let i = 0; i < n; i++) if (!codeOf.has((values[i]! >> 7) & 0xff)) escapes++;
  const L = referenceLayout(n, escapes, chunkSize);
  const out = new Uint8Array(L.total);
  const dv = new DataView(out.buffer);
  out.set([0x53, 0x5a, 0x42, 0x46], 0);
  dv.setUint16(4, version, true);
  dv.setUint16(6, 256, true);
  dv.setUint32(8, 0, true);
  dv.setUint32(12, chunkSize, true);
  dv.setBigUint64(16, BigInt(n), true);
  dv.setBigUint64(24, BigInt(escapes), true);
  dv.setUint32(32, L.chunkCount, true);
  out[36] = exponents.length;
  for (let k = 0; k < exponents.length; k++) out[40 + k] = exponents[k]!;
  const sections: [number, number][] = [
    [L.a1, Math.ceil(n / 2)],
    [L.a2, n],
    [L.a3, 4 * (L.chunkCount + 1)],
    [L.a4, 2 * escapes],
    [L.a5, escapes],
  ];
  sections.forEach(([off, len], s) => {
    dv.setBigUint64(56 + 16 * s, BigInt(off), true);
    dv.setBigUint64(64 + 16 * s, BigInt(len), true);
  });
  dv.setBigUint64(136, BigInt(L.total), true);
  let j = 0;
  for (let c = 0; c < L.chunkCount; c++) {
    dv.setUint32(L.a3 + 4 * c, j, true);
    for (let i = c * chunkSize; i < Math.min(n, (c + 1) * chunkSize); i++) {
      const v = values[i]!;
      const e = (v >> 7) & 0xff;
      let code = codeOf.get(e) ?? -1;
      if (code < 0) {
        code = 0;
        dv.setUint16(L.a4 + 2 * j, i - c * chunkSize, true);
        out[L.a5 + j] = e;
        j++;
      }
      out[L.a1 + (i >> 1)]! |= (i & 1) === 0 ? code : code << 4;
      out[L.a2 + i] = ((v >> 8) & 0x80) | (v & 0x7f);
    }
  }
  dv.setUint32(L.a3 + 4 * L.chunkCount, j, true);
  dv.setUint32(252, referenceChecksum(out), true);
  return out;
}

/** XXH32 of stripe stream j of `ways` over a span: its 16-byte stripes j, j + ways, j + 2 ways, … concatenated. */
function stripeStreamDigest(span: Uint8Array, j: number, ways: number): number {
  const stream: number[] = [];
  for (let p = 16 * j; p + 16 <= span.length; p += 16 * ways) {
    for (let q = p; q < p + 16; q++) stream.push(span[q]!);
  }
  return scalarXxh32(Uint8Array.from(stream));
}

/**
 * FORMAT.md's checksum, for the version in the payload's header: XXH32 of the digests (u32 LE) of
 * header (checksum field zeroed), codes, sm, escape index, escape positions, escape exponents, each
 * section with its trailing padding. v1: codes and sm each one stream. v2: codes one stream, sm its
 * even then odd 16-byte stripes. v3: per segment of 2^20 values (its codes bytes [k 2^19, (k+1) 2^19)
 * and sm bytes [k 2^20, (k+1) 2^20) of the section spans, the last segment to the span's end) the
 * codes' 2 and the sm's 4 stripe streams.
 */
export function referenceChecksum(payload: Uint8Array): number {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const version = dv.getUint16(4, true);
  const n = Number(dv.getBigUint64(16, true));
  const total = Number(dv.getBigUint64(136, true));
  const header = payload.slice(0, 256);
  header.fill(0, 252, 256);
  const bounds = [56, 72, 88, 104, 120].map((at) => Number(dv.getBigUint64(at, true)));
  bounds.push(total);
  const list: number[] = [scalarXxh32(header)];
  if (version === 3) {
    const segmentCount = Math.ceil(n / 2 ** 20);
    for (let k = 0; k < segmentCount; k++) {
      const last = k === segmentCount - 1;
      const codes = payload.subarray(bounds[0]! + k * 2 ** 19, last ? bounds[1]! : bounds[0]! + (k + 1) * 2 ** 19);
      const sm = payload.subarray(bounds[1]! + k * 2 ** 20, last ? bounds[2]! : bounds[1]! + (k + 1) * 2 ** 20);
      for (let j = 0; j < 2; j++) list.push(stripeStreamDigest(codes, j, 2));
      for (let j = 0; j < 4; j++) list.push(stripeStreamDigest(sm, j, 4));
    }
    for (let s = 2; s < 5; s++) list.push(scalarXxh32(payload.subarray(bounds[s]!, bounds[s + 1]!)));
  } else {
    for (let s = 0; s < 5; s++) {
      const span = payload.subarray(bounds[s]!, bounds[s + 1]!);
      if (s === 1 && version === 2) {
        for (const parity of [0, 1]) list.push(stripeStreamDigest(span, parity, 2));
      } else {
        list.push(scalarXxh32(span));
      }
    }
  }
  const digests = new DataView(new ArrayBuffer(4 * list.length));
  list.forEach((d, k) => digests.setUint32(4 * k, d, true));
  return scalarXxh32(new Uint8Array(digests.buffer));
}

/** Decodes a payload the reference encoder made (no validation: it is the oracle, not a reader). */
export function referenceDecode(payload: Uint8Array): Uint16Array {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const chunkSize = dv.getUint32(12, true);
  const n = Number(dv.getBigUint64(16, true));
  const size = payload[36]!;
  const exponents = Array.from(payload.subarray(40, 40 + size));
  const a1 = Number(dv.getBigUint64(56, true));
  const a2 = Number(dv.getBigUint64(72, true));
  const a3 = Number(dv.getBigUint64(88, true));
  const a4 = Number(dv.getBigUint64(104, true));
  const a5 = Number(dv.getBigUint64(120, true));
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const b = payload[a1 + (i >> 1)]!;
    const code = (i & 1) === 0 ? b & 15 : b >> 4;
    const e = exponents[code]!;
    const sm = payload[a2 + i]!;
    out[i] = ((sm & 0x80) << 8) | (e << 7) | (sm & 0x7f);
  }
  const chunkCount = Math.ceil(n / chunkSize);
  for (let c = 0; c < chunkCount; c++) {
    for (let j = dv.getUint32(a3 + 4 * c, true); j < dv.getUint32(a3 + 4 * (c + 1), true); j++) {
      const i = c * chunkSize + dv.getUint16(a4 + 2 * j, true);
      const e = payload[a5 + j]!;
      out[i] = (out[i]! & 0x807f) | (e << 7);
    }
  }
  return out;
}

/** Deterministic PRNG (mulberry32) so failures reproduce. */
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

/** BF16 bit patterns of Gaussian(0, sigma) samples (round to nearest even from float32). */
export function gaussianBf16(n: number, sigma: number, seed: number): Uint16Array {
  const rand = createRandom(seed);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const r = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
    f[0] = r * sigma;
    const bits = u[0]!;
    out[i] = (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return out;
}

export function randomBf16(n: number, seed: number): Uint16Array {
  const rand = createRandom(seed);
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(rand() * 65536);
  return out;
}

/** Recomputes and stores the checksum (for building payloads that break a rule past the checksum). */
export function resealPayload(payload: Uint8Array): Uint8Array {
  const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  dv.setUint32(252, referenceChecksum(payload), true);
  return payload;
}

/** Values whose exponents cycle through `exponents` (sign and mantissa random). */
export function valuesWithExponents(n: number, exponents: readonly number[], seed: number): Uint16Array {
  const rand = createRandom(seed);
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const e = exponents[Math.floor(rand() * exponents.length)]!;
    out[i] = (rand() < 0.5 ? 0x8000 : 0) | (e << 7) | Math.floor(rand() * 128);
  }
  return out;
}

/** All 65,536 BF16 bit patterns in a shuffled, seeded order. */
export function allBf16Patterns(seed: number): Uint16Array {
  const out = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) out[i] = i;
  const rand = createRandom(seed);
  for (let i = 65535; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    const t = out[i]!;
    out[i] = out[j]!;
    out[j] = t;
  }
  return out;
}
