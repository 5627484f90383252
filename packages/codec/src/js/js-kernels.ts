// Typed-array JS kernels: the path where WebAssembly SIMD is unavailable (and the wasm path's fallback).
import type { CodebookTables, CodecKernels, EncodeOffsets } from '../backend.js';
import type { PayloadLayout } from '../compute-payload-layout.js';
import type { EscapeList } from '../escape-list.js';
import { digestSegments } from '../payload-checksum.js';

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// sm byte -> its bits in place in a BF16 pattern (sign to bit 15, mantissa stays in bits 6..0).
const SM_BITS = new Uint16Array(256);
for (let s = 0; s < 256; s++) SM_BITS[s] = ((s & 0x80) << 8) | (s & 0x7f);
// A pair of sm bytes (as one little-endian u16) -> both values' sm bits (as one u32): one lookup
// per two values. 256 KiB, built once.
const SM_PAIR_BITS = new Uint32Array(65536);
for (let p = 0; p < 65536; p++) SM_PAIR_BITS[p] = SM_BITS[p & 0xff]! | (SM_BITS[p >>> 8]! << 16);

// Per codebook: a code byte (two codes) -> both values' exponent bits as one u32.
const pairTables = new WeakMap<CodebookTables, Uint32Array>();
function exponentPairBits(tables: CodebookTables): Uint32Array {
  let t = pairTables.get(tables);
  if (t === undefined) {
    t = new Uint32Array(256);
    const e = tables.exponentBitsOfCode;
    for (let b = 0; b < 256; b++) t[b] = e[b & 15]! | (e[b >>> 4]! << 16);
    pairTables.set(tables, t);
  }
  return t;
}

function decodeValues(
  payload: Uint8Array,
  codesOffset: number,
  smOffset: number,
  from: number,
  to: number,
  out: Uint16Array,
  outOffset: number,
  tables: CodebookTables,
): boolean {
  const expBits = tables.exponentBitsOfCode;
  const size = tables.size;
  let maxCode = 0;
  let o = outOffset;
  let i = from;
  if (i < to && (i & 1) === 1) {
    const code = payload[codesOffset + (i >>> 1)]! >>> 4;
    if (code > maxCode) maxCode = code;
    out[o++] = SM_BITS[payload[smOffset + i]!]! | expBits[code]!;
    i++;
  }
  // i is even here: byte i/2 holds values i (low nibble) and i+1 (high nibble).
  const pairs = (to - i) >>> 1;
  const smAt = payload.byteOffset + smOffset + i;
  const outAt = out.byteOffset + 2 * o;
  if (LITTLE_ENDIAN && pairs > 0 && (smAt & 1) === 0 && (outAt & 3) === 0) {
    // Fast path: one u16 read of two sm bytes, one u32 store of two values.
    const pairBits = exponentPairBits(tables);
    const sm16 = new Uint16Array(payload.buffer, smAt, pairs);
    const out32 = new Uint32Array(out.buffer, outAt, pairs);
    let cp = codesOffset + (i >>> 1);
    for (let k = 0; k < pairs; k++) {
      const b = payload[cp++]!;
      maxCode |= b;
      out32[k] = pairBits[b]! | SM_PAIR_BITS[sm16[k]!]!;
    }
    i += 2 * pairs;
    o += 2 * pairs;
  } else {
    let cp = codesOffset + (i >>> 1);
    let sp = smOffset + i;
    const pairEnd = i + 2 * pairs;
    for (; i < pairEnd; i += 2) {
      const b = payload[cp++]!;
      maxCode |= b;
      out[o++] = SM_BITS[payload[sp++]!]! | expBits[b & 15]!;
      out[o++] = SM_BITS[payload[sp++]!]! | expBits[b >>> 4]!;
    }
  }
  if (i < to) {
    const code = payload[codesOffset + (i >>> 1)]! & 15;
    if (code > maxCode) maxCode = code;
    out[o] = SM_BITS[payload[smOffset + i]!]! | expBits[code]!;
  }
  if (size === 16) return true;
  // maxCode folded both nibbles together with |; recheck exactly only when it could be over the limit.
  if ((maxCode & 15) < size && maxCode >>> 4 < size) return true;
  return checkCodes(payload, codesOffset, from, to, size);
}

function checkCodes(payload: Uint8Array, codesOffset: number, from: number, to: number, size: number): boolean {
  for (let i = from; i < to; i++) {
    const b = payload[codesOffset + (i >>> 1)]!;
    const code = (i & 1) === 0 ? b & 15 : b >>> 4;
    if (code >= size) return false;
  }
  return true;
}

function countEscapes(values: Uint16Array, tables: CodebookTables): number {
  const codeOf = tables.codeOfExponent;
  let escapes = 0;
  const n = values.length;
  for (let i = 0; i < n; i++) escapes += codeOf[(values[i]! >>> 7) & 0xff]! >>> 4;
  return escapes;
}

function encodeSections(
  values: Uint16Array,
  tables: CodebookTables,
  payload: Uint8Array,
  at: EncodeOffsets,
  escapes: EscapeList,
): null {
  const codeOf = tables.codeOfExponent;
  const n = values.length;
  // Fast path: two values per u32 load, two sm bytes per u16 store. Needs aligned views on a
  // little-endian host.
  // n >= 2: no view to make otherwise (and none can be made over a detached, empty input).
  const aligned = LITTLE_ENDIAN && n >= 2 && (values.byteOffset & 3) === 0 && ((payload.byteOffset + at.sm) & 1) === 0;
  const pairEnd = n & ~1;
  let cp = at.codes;
  let i = 0;
  if (aligned) {
    const v32 = new Uint32Array(values.buffer, values.byteOffset, n >>> 1);
    const sm16 = new Uint16Array(payload.buffer, payload.byteOffset + at.sm, n >>> 1);
    for (; i < pairEnd; i += 2) {
      const w = v32[i >>> 1]!; // w = v0 | v1 << 16
      const c0 = codeOf[(w >>> 7) & 0xff]!;
      const c1 = codeOf[(w >>> 23) & 0xff]!;
      // sm bytes of both values as one u16: mantissas stay, signs (bits 15, 31) go to bits 7, 15
      sm16[i >>> 1] = (w & 0x7f) | ((w >>> 8) & 0x7f80) | ((w >>> 16) & 0x8000);
      if (((c0 | c1) & 16) === 0) {
        payload[cp++] = c0 | (c1 << 4);
      } else {
        payload[cp++] = (c0 & 15) | ((c1 & 15) << 4); // an escape's code is 0
        if (c0 === 16) escapes.push(i, (w >>> 7) & 0xff);
        if (c1 === 16) escapes.push(i + 1, (w >>> 23) & 0xff);
      }
    }
  }
  let sp = at.sm + i;
  for (; i < n; i += 2) {
    const v0 = values[i]!;
    const e0 = (v0 >>> 7) & 0xff;
    let c0 = codeOf[e0]!;
    if (c0 === 16) {
      c0 = 0;
      escapes.push(i, e0);
    }
    payload[sp++] = ((v0 >>> 8) & 0x80) | (v0 & 0x7f);
    let c1 = 0;
    if (i + 1 < n) {
      const v1 = values[i + 1]!;
      const e1 = (v1 >>> 7) & 0xff;
      c1 = codeOf[e1]!;
      if (c1 === 16) {
        c1 = 0;
        escapes.push(i + 1, e1);
      }
      payload[sp++] = ((v1 >>> 8) & 0x80) | (v1 & 0x7f);
    }
    payload[cp++] = c0 | (c1 << 4);
  }
  payload.fill(0, cp, at.codesEnd);
  payload.fill(0, at.sm + n, at.smEnd);
  return null;
}

/** Format v3's segment digests: each stripe stream through aligned u32 words where it can (Xxh32State.updateStripes). */
function segmentDigests(payload: Uint8Array, layout: PayloadLayout, first: number, end: number, out: Uint32Array): void {
  digestSegments(payload, layout, first, end, out);
}

const NO_WORDS = new Uint32Array(0);
const SUB_HISTOGRAMS = new Uint32Array(1024);

/** Adds the exponent histogram of `values` to `histogram` (256 counters; each bin wraps mod 2^32). */
export function countExponentsJs(values: Uint16Array, histogram: Uint32Array): void {
  // Four sub-histograms (one per value of a pair of 32-bit words) cut the store-to-load dependency
  // when neighbours share an exponent, and one 32-bit load fetches two values: 1.6x the plain loop.
  // Which half of a word is which value does not matter to a histogram (any endianness). The
  // tables are reused (cleared per call): allocating them cost more than counting 1,000 values.
  const sub = SUB_HISTOGRAMS.fill(0);
  const n = values.length;
  // A view that starts mid-word: its first value alone, then whole words.
  let i = (values.byteOffset & 3) !== 0 ? Math.min(1, n) : 0;
  if (i === 1) sub[(values[0]! >>> 7) & 0xff]!++;
  const words = n - i >= 2 ? new Uint32Array(values.buffer, values.byteOffset + 2 * i, (n - i) >>> 1) : NO_WORDS;
  const wordPairs = words.length & ~1;
  for (let w = 0; w < wordPairs; w += 2) {
    const lo = words[w]!;
    const hi = words[w + 1]!;
    sub[(lo >>> 7) & 0xff]!++;
    sub[256 + ((lo >>> 23) & 0xff)]!++;
    sub[512 + ((hi >>> 7) & 0xff)]!++;
    sub[768 + ((hi >>> 23) & 0xff)]!++;
  }
  for (i += 2 * wordPairs; i < n; i++) sub[(values[i]! >>> 7) & 0xff]!++;
  const hist = histogram;
  for (let e = 0; e < 256; e++) hist[e] = hist[e]! + sub[e]! + sub[256 + e]! + sub[512 + e]! + sub[768 + e]!;
}

export const jsKernels: CodecKernels = {
  name: 'js',
  decodeValues,
  countEscapes,
  encodeSections,
  segmentDigests,
  countExponents: countExponentsJs,
};
