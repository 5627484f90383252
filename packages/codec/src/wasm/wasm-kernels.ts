// WebAssembly SIMD kernels (wasm/codec.wat, embedded as base64). Wasm can only touch its own
// memory, so each operation streams the payload or tensor through it in cache-sized blocks:
// copy a block in, run the kernel, copy the result out while it is still in L2.
import type { CodebookTables, CodecKernels, DecodeLayout, EncodeOffsets } from '../backend.js';
import { HEADER_BYTES, HEADER_OFFSET } from '../constants.js';
import { Xxh32State } from '../xxh32.js';
import { CODEC_WASM_BASE64 } from './codec-wasm.generated.js';

interface CodecExports {
  memory: WebAssembly.Memory;
  decode(codes: number, sm: number, out: number, groups: number, hash: number): number;
  xxh32_stripes(at: number, stripes: number): void;
  count_escapes(input: number, groups: number, tables: number): number;
  encode(
    input: number,
    codes: number,
    sm: number,
    groups: number,
    escIndex: number,
    escExp: number,
    tables: number,
    hash: number,
  ): number;
}

// Memory map (see codec.wat): fixed tables below DATA_AT, block buffers above.
const DECODE_TABLES_AT = 0;
const XXH_LANES_AT = 32;
const ENCODE_TABLES_AT = 1024;
const DATA_AT = 4096;
/** Values per block: sized so a block's input and output stay in a 2-core machine's L2 together. */
export const BLOCK_VALUES = 32768;
const GROUP_VALUES = 32;
// Decode block buffers.
const DEC_CODES_AT = DATA_AT;
const DEC_SM_AT = DEC_CODES_AT + BLOCK_VALUES / 2 + 64;
const DEC_OUT_AT = DEC_SM_AT + BLOCK_VALUES + 64;
const DEC_END = DEC_OUT_AT + 2 * BLOCK_VALUES + 128;
// Encode block buffers.
const ENC_IN_AT = DATA_AT;
const ENC_CODES_AT = ENC_IN_AT + 2 * BLOCK_VALUES + 128;
const ENC_SM_AT = ENC_CODES_AT + BLOCK_VALUES / 2 + 64;
const ENC_ESC_INDEX_AT = ENC_SM_AT + BLOCK_VALUES + 64;
const ENC_ESC_EXP_AT = ENC_ESC_INDEX_AT + 4 * BLOCK_VALUES + 128;
const ENC_END = ENC_ESC_EXP_AT + BLOCK_VALUES + 64;
// Checksum block buffer.
const HASH_BLOCK_BYTES = 65536;
const HASH_AT = DATA_AT;
const HASH_END = HASH_AT + HASH_BLOCK_BYTES;

// A one-function module using v128: validates only where WebAssembly SIMD is implemented.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03, 0x02, 0x01, 0x00,
  0x0a, 0x0a, 0x01, 0x08, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0xfd, 0x62, 0x0b,
]);

function decodeBase64(text: string): Uint8Array<ArrayBuffer> {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const lookup = new Uint8Array(128);
  for (let k = 0; k < alphabet.length; k++) lookup[alphabet.charCodeAt(k)] = k;
  const clean = text.replace(/=+$/, '');
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let k = 0; k < clean.length; k++) {
    acc = (acc << 6) | lookup[clean.charCodeAt(k)]!;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >>> bits) & 0xff;
    }
  }
  return out;
}

/** Capability check (not environment sniffing): does this engine validate a SIMD module? */
export function isWasmSimdSupported(): boolean {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

/** Instantiates the embedded module synchronously (it is under the 4 KiB main-thread limit). */
export function createWasmKernels(): CodecKernels | null {
  if (!isWasmSimdSupported()) return null;
  let ex: CodecExports;
  try {
    const module = new WebAssembly.Module(decodeBase64(CODEC_WASM_BASE64));
    ex = new WebAssembly.Instance(module, {}).exports as unknown as CodecExports;
  } catch {
    return null;
  }
  const memory = ex.memory;
  let u8 = new Uint8Array(memory.buffer);
  let u16 = new Uint16Array(memory.buffer);
  let u32 = new Uint32Array(memory.buffer);

  function ensureMemory(bytes: number): void {
    if (memory.buffer.byteLength >= bytes) return;
    memory.grow(Math.ceil((bytes - memory.buffer.byteLength) / 65536));
    u8 = new Uint8Array(memory.buffer);
    u16 = new Uint16Array(memory.buffer);
    u32 = new Uint32Array(memory.buffer);
  }

  let decodeTablesFor: CodebookTables | null = null;
  function loadDecodeTables(tables: CodebookTables): void {
    if (decodeTablesFor === tables) return;
    for (let k = 0; k < 16; k++) {
      const e = k < tables.size ? tables.exponents[k]! : 0;
      u8[DECODE_TABLES_AT + k] = e >>> 1;
      u8[DECODE_TABLES_AT + 16 + k] = (e & 1) << 7;
    }
    decodeTablesFor = tables;
  }

  /**
   * Covers the codebook with windows of 16 consecutive exponents (greedy from the smallest), one
   * swizzle table each; returns the window count (1 for the usual calibrated codebook).
   */
  let encodeTablesFor: CodebookTables | null = null;
  let encodeTableCount = 0;
  function loadEncodeTables(tables: CodebookTables): number {
    if (encodeTablesFor === tables) return encodeTableCount;
    const sorted = [...tables.exponents].sort((x, y) => x - y);
    const bases: number[] = [];
    for (const e of sorted) if (bases.length === 0 || e >= bases[bases.length - 1]! + 16) bases.push(e);
    for (let t = 0; t < bases.length; t++) {
      const base = bases[t]!;
      for (let j = 0; j < 16; j++) {
        const code = base + j < 256 ? tables.codeOfExponent[base + j]! : 16;
        u8[ENCODE_TABLES_AT + 32 * t + j] = code === 16 ? 0 : code + 1;
        u8[ENCODE_TABLES_AT + 32 * t + 16 + j] = base;
      }
    }
    encodeTablesFor = tables;
    encodeTableCount = bases.length;
    return encodeTableCount;
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
    ensureMemory(DEC_END);
    loadDecodeTables(tables);
    let maxCode = 0;
    // Blocks start on a 32-value group boundary, so a block's codes start on a whole byte.
    for (let a = from - (from % GROUP_VALUES); a < to; a += BLOCK_VALUES) {
      const b = Math.min(a + BLOCK_VALUES, to);
      const groups = Math.ceil((b - a) / GROUP_VALUES);
      const codesFrom = codesOffset + a / 2;
      const codeBytes = Math.ceil(b / 2) - a / 2;
      u8.set(payload.subarray(codesFrom, codesFrom + codeBytes), DEC_CODES_AT);
      u8.fill(0, DEC_CODES_AT + codeBytes, DEC_CODES_AT + groups * 16);
      u8.set(payload.subarray(smOffset + a, smOffset + b), DEC_SM_AT);
      const m = ex.decode(DEC_CODES_AT, DEC_SM_AT, DEC_OUT_AT, groups, 0);
      if (m > maxCode) maxCode = m;
      const lo = Math.max(a, from);
      out.set(u16.subarray(DEC_OUT_AT / 2 + (lo - a), DEC_OUT_AT / 2 + (b - a)), outOffset + (lo - from));
    }
    // Conservative: the first and last groups may include codes outside [from, to); the caller rechecks exactly.
    return maxCode < tables.size;
  }

  /** Copies values [a, b) into the encode input buffer, padding the last group with a code-0 value. */
  function loadValues(values: Uint16Array, a: number, b: number, padValue: number): number {
    const groups = Math.ceil((b - a) / GROUP_VALUES);
    u16.set(values.subarray(a, b), ENC_IN_AT / 2);
    u16.fill(padValue, ENC_IN_AT / 2 + (b - a), ENC_IN_AT / 2 + groups * GROUP_VALUES);
    return groups;
  }

  function countEscapes(values: Uint16Array, tables: CodebookTables): number {
    ensureMemory(ENC_END);
    const tableCount = loadEncodeTables(tables);
    const padValue = tables.exponents[0]! << 7;
    const n = values.length;
    let escapes = 0;
    for (let a = 0; a < n; a += BLOCK_VALUES) {
      const groups = loadValues(values, a, Math.min(n, a + BLOCK_VALUES), padValue);
      escapes += ex.count_escapes(ENC_IN_AT, groups, tableCount);
    }
    return escapes;
  }

  function encodeSections(
    values: Uint16Array,
    tables: CodebookTables,
    payload: Uint8Array,
    at: EncodeOffsets,
    withChecksum: boolean,
  ): { escapes: number; checksum: number | null } {
    ensureMemory(Math.max(ENC_END, HASH_END));
    const tableCount = loadEncodeTables(tables);
    const padValue = tables.exponents[0]! << 7;
    const n = values.length;
    const chunkSize = at.chunkSize;
    const chunkCount = Math.ceil(n / chunkSize);
    // The checksum runs over the header, then the codes as the kernel makes them.
    if (withChecksum) startChecksum(payload);
    let hashed = at.codes;
    let escapes = 0;
    let nextIndexChunk = 0; // index entries [0, nextIndexChunk) are written
    for (let a = 0; a < n; a += BLOCK_VALUES) {
      const b = Math.min(n, a + BLOCK_VALUES);
      const groups = loadValues(values, a, b, padValue);
      const found = ex.encode(ENC_IN_AT, ENC_CODES_AT, ENC_SM_AT, groups, ENC_ESC_INDEX_AT, ENC_ESC_EXP_AT, tableCount, withChecksum ? 1 : 0);
      // Whole groups of codes were hashed: past n they are zero, as the section's padding is.
      hashed = at.codes + a / 2 + groups * 16;
      payload.set(u8.subarray(ENC_CODES_AT, ENC_CODES_AT + Math.ceil((b - a) / 2)), at.codes + a / 2);
      payload.set(u8.subarray(ENC_SM_AT, ENC_SM_AT + (b - a)), at.sm + a);
      for (let j = 0; j < found; j++) {
        const i = a + u32[ENC_ESC_INDEX_AT / 4 + j]!;
        const chunk = Math.floor(i / chunkSize);
        while (nextIndexChunk <= chunk) writeU32(payload, at.escapeIndex + 4 * nextIndexChunk++, escapes);
        if (escapes < at.escapeCount) {
          const pos = i - chunk * chunkSize;
          payload[at.escapePositions + 2 * escapes] = pos & 0xff;
          payload[at.escapePositions + 2 * escapes + 1] = pos >>> 8;
          payload[at.escapeExponents + escapes] = u8[ENC_ESC_EXP_AT + j]!;
        }
        escapes++;
      }
    }
    while (nextIndexChunk <= chunkCount) writeU32(payload, at.escapeIndex + 4 * nextIndexChunk++, escapes);
    if (!withChecksum || escapes !== at.escapeCount) return { escapes, checksum: null };
    return { escapes, checksum: finishChecksum(payload, hashed, payload.length) };
  }

  /** Starts a checksum: lanes seeded, the header hashed with its checksum field as zero. */
  function startChecksum(payload: Uint8Array): void {
    const lanes = new Xxh32State(0).getLanes();
    for (let k = 0; k < 4; k++) u32[XXH_LANES_AT / 4 + k] = lanes[k]!;
    u8.set(payload.subarray(0, HEADER_BYTES), HASH_AT);
    u32[(HASH_AT + HEADER_OFFSET.checksum) / 4] = 0;
    ex.xxh32_stripes(HASH_AT, HEADER_BYTES / 16);
  }

  /** Hashes payload[from, to) (from a multiple of 16 from the start) through wasm memory. */
  function hashRange(payload: Uint8Array, from: number, to: number): void {
    for (let p = from; p < to; p += HASH_BLOCK_BYTES) {
      const q = Math.min(to, p + HASH_BLOCK_BYTES);
      u8.set(payload.subarray(p, q), HASH_AT);
      ex.xxh32_stripes(HASH_AT, (q - p) / 16);
    }
  }

  /** Finishes a checksum whose lanes have covered payload[0, hashedBytes). */
  function finishChecksum(payload: Uint8Array, hashedBytes: number, totalBytes: number): number {
    const wholeEnd = totalBytes - (totalBytes % 16);
    hashRange(payload, hashedBytes, wholeEnd);
    const state = new Xxh32State(0);
    const l = XXH_LANES_AT / 4;
    state.setLanes(u32[l]!, u32[l + 1]!, u32[l + 2]!, u32[l + 3]!, wholeEnd);
    if (wholeEnd < totalBytes) state.update(payload, wholeEnd, totalBytes);
    return state.digest();
  }

  function checksum(payload: Uint8Array, totalBytes: number): number {
    ensureMemory(Math.max(HASH_END, DEC_END));
    startChecksum(payload);
    return finishChecksum(payload, HEADER_BYTES, totalBytes);
  }

  /**
   * Decodes all n values into out[0, n) and computes the payload checksum in the same pass over
   * the sm section (the checksum's order is header, codes, sm, ...: the codes are hashed first).
   */
  function decodeAllWithChecksum(
    payload: Uint8Array,
    layout: DecodeLayout,
    elementCount: number,
    out: Uint16Array,
    tables: CodebookTables,
  ): { checksum: number; codesValid: boolean } {
    ensureMemory(Math.max(HASH_END, DEC_END));
    loadDecodeTables(tables);
    const codesOffset = layout.codesOffset;
    const smOffset = layout.smOffset;
    startChecksum(payload);
    hashRange(payload, HEADER_BYTES, smOffset);
    let maxCode = 0;
    let hashed = smOffset;
    for (let a = 0; a < elementCount; a += BLOCK_VALUES) {
      const b = Math.min(a + BLOCK_VALUES, elementCount);
      const groups = Math.ceil((b - a) / GROUP_VALUES);
      const codesFrom = codesOffset + a / 2;
      const codeBytes = Math.ceil(b / 2) - a / 2;
      u8.set(payload.subarray(codesFrom, codesFrom + codeBytes), DEC_CODES_AT);
      u8.fill(0, DEC_CODES_AT + codeBytes, DEC_CODES_AT + groups * 16);
      // Whole groups of sm bytes: past n they are the section's zero padding, which the checksum covers too.
      u8.set(payload.subarray(smOffset + a, smOffset + a + groups * GROUP_VALUES), DEC_SM_AT);
      const m = ex.decode(DEC_CODES_AT, DEC_SM_AT, DEC_OUT_AT, groups, 1);
      if (m > maxCode) maxCode = m;
      hashed = smOffset + a + groups * GROUP_VALUES;
      out.set(u16.subarray(DEC_OUT_AT / 2, DEC_OUT_AT / 2 + (b - a)), a);
    }
    return { checksum: finishChecksum(payload, hashed, layout.totalBytes), codesValid: maxCode < tables.size };
  }

  return { name: 'wasm-simd', decodeValues, countEscapes, encodeSections, checksum, decodeAllWithChecksum };
}

function writeU32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value & 0xff;
  bytes[at + 1] = (value >>> 8) & 0xff;
  bytes[at + 2] = (value >>> 16) & 0xff;
  bytes[at + 3] = (value >>> 24) & 0xff;
}
