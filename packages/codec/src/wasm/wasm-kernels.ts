// WebAssembly SIMD kernels (wasm/codec.wat, embedded as base64). Wasm can only touch its own
// memory: data that lives there already (a codec arena's views) is used in place; anything else
// streams through the scratch area in cache-sized blocks (copy a block in, run the kernel, copy
// the result out while it is still in L2).
import type { CodebookTables, CodecKernels, EncodeOffsets, ValuesWritten } from '../backend.js';
import type { PayloadLayout } from '../compute-payload-layout.js';
import type { EscapeList } from '../escape-list.js';
import { countSegments, computeSegmentSpans, type BulkDigests } from '../payload-checksum.js';
import { SEGMENT_DIGESTS, SEGMENT_VALUES } from '../constants.js';
import { Xxh32State } from '../xxh32.js';
import type { ShareLock } from '../arena-share-lock.js';
import { CODEC_WASM_BASE64, CODEC_WASM_SHARED_BASE64 } from './codec-wasm.generated.js';

interface CodecExports {
  decode(codes: number, sm: number, out: number, groups: number, hash: number): number;
  hash_groups(codes: number, sm: number, groups: number, mode: number): void;
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
  count_exponents(input: number, chunks: number, tables: number): number;
}

// Memory map (see codec.wat): fixed tables below DATA_AT, block buffers above, arena space past
// WASM_SCRATCH_BYTES.
const DECODE_TABLES_AT = 0;
const CODES_LANES_AT = 32;
const SM_LANES_AT = 48;
/** Format v2's second sm chain (odd stripes). */
const SM_ODD_LANES_AT = 64;
/** Format v3's six chains (codes streams 0, 1; sm streams 0..3): see codec.wat's memory map. */
const V3_CODES_LANES_AT = [32, 80];
const V3_SM_LANES_AT = [48, 64, 96, 112];
const ENCODE_TABLES_AT = 1024;
const DATA_AT = 4096;
/** Values per block: sized so a block's input and output stay in a 2-core machine's L2 together. */
export const BLOCK_VALUES = 32768;
/**
 * Values per decode call when payload and output are both in place (a codec arena): no scratch
 * bounds them, and fewer calls cost less (2^24 values, cold caches: 1.05-1.17x the 32,768-value
 * blocks; 8x no better, 32x slower). 256 KiB of output, still in L2 when its escapes are patched.
 */
const IN_PLACE_BLOCK_VALUES = 4 * BLOCK_VALUES;
const GROUP_VALUES = 32;
// Decode block buffers (whole groups: 16 code bytes, 32 sm bytes, 64 output bytes each).
const DEC_CODES_AT = DATA_AT;
const DEC_SM_AT = DEC_CODES_AT + BLOCK_VALUES / 2;
const DEC_OUT_AT = DEC_SM_AT + BLOCK_VALUES;
const DEC_END = DEC_OUT_AT + 2 * BLOCK_VALUES;
// Encode block buffers (the same area: an operation uses one set at a time).
const ENC_IN_AT = DATA_AT;
const ENC_CODES_AT = ENC_IN_AT + 2 * BLOCK_VALUES;
const ENC_SM_AT = ENC_CODES_AT + BLOCK_VALUES / 2;
const ENC_ESC_INDEX_AT = ENC_SM_AT + BLOCK_VALUES;
const ENC_ESC_EXP_AT = ENC_ESC_INDEX_AT + 4 * BLOCK_VALUES;
const ENC_END = ENC_ESC_EXP_AT + BLOCK_VALUES;
// countExponents: the kernel's four tables of 256 u32 counters, then a block of input values.
const COUNT_TABLES_AT = DATA_AT;
const COUNT_TABLE_COUNT = 4;
const COUNT_IN_AT = COUNT_TABLES_AT + 4 * 256 * COUNT_TABLE_COUNT;
const COUNT_END = COUNT_IN_AT + 2 * BLOCK_VALUES;
const PAGE_BYTES = 65536;
/** Bytes at the start of every instance's memory reserved for tables and block buffers. */
export const WASM_SCRATCH_BYTES = Math.ceil(Math.max(DEC_END, ENC_END, COUNT_END) / PAGE_BYTES) * PAGE_BYTES;
/**
 * Largest wasm32 memory we create: 65535 pages, one short of 4 GiB, so that no pointer + length a
 * kernel computes wraps around 2^32.
 */
export const MAX_WASM_MEMORY_BYTES = 65535 * PAGE_BYTES;
// XXH32 lanes for seed 0 (xxHash spec): v1 = P1 + P2, v2 = P2, v3 = 0, v4 = -P1.
const XXH_SEED0_LANES = new Xxh32State(0).getLanes();

// A one-function module using v128: validates only where WebAssembly SIMD is implemented.
const SIMD_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, 0x03, 0x02, 0x01, 0x00,
  0x0a, 0x0a, 0x01, 0x08, 0x00, 0x41, 0x00, 0xfd, 0x0f, 0xfd, 0x62, 0x0b,
]);

/** A layout with the offsets computeSegmentSpans reads, from an encoder's section offsets and n. */
function encodeLayout(at: EncodeOffsets, n: number): PayloadLayout {
  const section = (offsetBytes: number, byteLength: number) => ({ offsetBytes, byteLength });
  return {
    codes: section(at.codes, Math.ceil(n / 2)),
    sm: section(at.sm, n),
    escapeIndex: section(at.smEnd, 0),
    escapePositions: section(at.smEnd, 0),
    escapeExponents: section(at.smEnd, 0),
    totalBytes: at.smEnd,
  };
}

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

/**
 * Why the engine refused to compile the embedded module where it validates SIMD ("CompileError:
 * WebAssembly.Module(): Refused to compile ..."): a page's Content Security Policy without
 * 'wasm-unsafe-eval' does that, and "SIMD is not available" would send its author the wrong way.
 * Undefined while nothing was refused.
 */
let compileRefusal: string | undefined;

export function wasmCompileRefusal(): string | undefined {
  return compileRefusal;
}

function describeRefusal(error: unknown): string {
  try {
    const { name, message } = error as { name?: unknown; message?: unknown };
    return typeof message === 'string' ? `${typeof name === 'string' ? name : 'Error'}: ${message}` : String(error);
  } catch {
    return 'an error that cannot be read';
  }
}

/** Capability check (not environment sniffing): does this engine validate a SIMD module? */
export function isWasmSimdSupported(): boolean {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);
  } catch (error) {
    compileRefusal = describeRefusal(error);
    return false;
  }
}

const compiled: { private?: WebAssembly.Module | null; shared?: WebAssembly.Module | null } = {};

/** The embedded module for a private or a shared memory, compiled once; null without SIMD. */
function compileModule(shared: boolean): WebAssembly.Module | null {
  const kind = shared ? 'shared' : 'private';
  if (compiled[kind] === undefined) {
    compiled[kind] = null;
    if (isWasmSimdSupported()) {
      try {
        compiled[kind] = new WebAssembly.Module(decodeBase64(shared ? CODEC_WASM_SHARED_BASE64 : CODEC_WASM_BASE64));
      } catch (error) {
        compileRefusal = describeRefusal(error);
        compiled[kind] = null;
      }
    }
  }
  return compiled[kind];
}

/**
 * Instantiates the embedded module (compiled once, synchronously: it is under the 4 KiB
 * main-thread limit) over a new fixed-size memory: scratch plus `extraBytes` of arena space from
 * offset WASM_SCRATCH_BYTES. The memory never grows, so views on it are never detached; with
 * `shared` it is a shared memory (its buffer a SharedArrayBuffer) that other threads can attach
 * to (attachWasmKernels). Null where WebAssembly SIMD (or, for `shared`, shared memory) is
 * unavailable; throws RangeError when the memory cannot be reserved.
 */
export function createWasmKernels(
  extraBytes: number,
  options: { shared?: boolean } = {},
): { kernels: CodecKernels; memory: WebAssembly.Memory } | null {
  const shared = options.shared === true;
  const module = compileModule(shared);
  if (module === null) return null;
  const pages = Math.ceil((WASM_SCRATCH_BYTES + extraBytes) / PAGE_BYTES);
  let memory: WebAssembly.Memory;
  try {
    memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared });
  } catch (error) {
    // A shared memory the engine refuses (no cross-origin isolation) means no shared kernels.
    if (shared && !(error instanceof RangeError)) return null;
    throw error;
  }
  return { kernels: bindKernels(module, memory, 0), memory };
}

/**
 * Kernels over an existing shared memory (made by createWasmKernels with `shared`, posted to this
 * thread) that use the scratch area at `scratchBase` (WASM_SCRATCH_BYTES long, reserved for this
 * thread by the memory's owner). Null where WebAssembly SIMD is unavailable.
 */
export function attachWasmKernels(memory: WebAssembly.Memory, scratchBase: number, lock?: ShareLock): CodecKernels | null {
  const module = compileModule(true);
  if (module === null) return null;
  return bindKernels(module, memory, scratchBase, lock);
}

function bindKernels(module: WebAssembly.Module, memory: WebAssembly.Memory, base: number, lock?: ShareLock): CodecKernels {
  const ex = new WebAssembly.Instance(module, { env: { memory, base: new WebAssembly.Global({ value: 'i32', mutable: false }, base) } })
    .exports as unknown as CodecExports;
  // This instance's scratch addresses (the fixed map, moved to its area of the memory).
  const scratch = {
    DECODE_TABLES_AT: base + DECODE_TABLES_AT,
    CODES_LANES_AT: base + CODES_LANES_AT,
    SM_LANES_AT: base + SM_LANES_AT,
    SM_ODD_LANES_AT: base + SM_ODD_LANES_AT,
    V3_CODES_LANES_AT: V3_CODES_LANES_AT.map((at) => base + at),
    V3_SM_LANES_AT: V3_SM_LANES_AT.map((at) => base + at),
    ENCODE_TABLES_AT: base + ENCODE_TABLES_AT,
    DEC_CODES_AT: base + DEC_CODES_AT,
    DEC_SM_AT: base + DEC_SM_AT,
    DEC_OUT_AT: base + DEC_OUT_AT,
    ENC_IN_AT: base + ENC_IN_AT,
    ENC_CODES_AT: base + ENC_CODES_AT,
    ENC_SM_AT: base + ENC_SM_AT,
    ENC_ESC_INDEX_AT: base + ENC_ESC_INDEX_AT,
    ENC_ESC_EXP_AT: base + ENC_ESC_EXP_AT,
    COUNT_TABLES_AT: base + COUNT_TABLES_AT,
    COUNT_IN_AT: base + COUNT_IN_AT,
  };
  const buf = memory.buffer;
  const u8 = new Uint8Array(buf);
  const u16 = new Uint16Array(buf);
  const u32 = new Uint32Array(buf);

  /** Where a view starts in this memory, or -1 when it lives elsewhere. */
  const addressOf = (view: ArrayBufferView): number => (view.buffer === buf ? view.byteOffset : -1);

  let decodeTablesFor: CodebookTables | null = null;
  function loadDecodeTables(tables: CodebookTables): void {
    if (decodeTablesFor === tables) return;
    for (let k = 0; k < 16; k++) {
      const e = k < tables.size ? tables.exponents[k]! : 0;
      // The exponent rotated right by one bit: codec.wat's decode splits it between the two bytes.
      u8[scratch.DECODE_TABLES_AT + k] = (e >>> 1) | ((e & 1) << 7);
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
        u8[scratch.ENCODE_TABLES_AT + 32 * t + j] = code === 16 ? 0 : code + 1;
        u8[scratch.ENCODE_TABLES_AT + 32 * t + 16 + j] = base;
      }
    }
    encodeTablesFor = tables;
    encodeTableCount = bases.length;
    return encodeTableCount;
  }

  /** Seeds every chain's lanes (v1, v2 and v3's six; they overlap). */
  function startDigests(): void {
    for (const at of [...scratch.V3_CODES_LANES_AT, ...scratch.V3_SM_LANES_AT]) {
      for (let k = 0; k < 4; k++) u32[at / 4 + k] = XXH_SEED0_LANES[k]!;
    }
  }

  /** Exchanges the v3 even-group lane sets (32..79) with the odd-group ones (80..127). */
  function swapParityLanes(): void {
    const even = scratch.V3_CODES_LANES_AT[0]! / 4;
    for (let w = 0; w < 12; w++) {
      const t = u32[even + w]!;
      u32[even + w] = u32[even + 12 + w]!;
      u32[even + 12 + w] = t;
    }
  }

  /**
   * Finishes stripe stream j of `ways` over the span [from, to) whose lanes (at lanesAt) covered
   * the span's first `hashedStripes` stripes (those of them in this stream); the stream's later
   * stripes (the last segment's padding) are hashed here.
   */
  function finishStream(lanesAt: number, payload: Uint8Array, from: number, to: number, ways: number, j: number, hashedStripes: number): number {
    const state = new Xxh32State(0);
    const l = lanesAt / 4;
    const covered = hashedStripes > j ? Math.floor((hashedStripes - 1 - j) / ways) + 1 : 0;
    state.setLanes(u32[l]!, u32[l + 1]!, u32[l + 2]!, u32[l + 3]!, 16 * covered);
    const next = hashedStripes + ((((j - hashedStripes) % ways) + ways) % ways);
    state.updateStripes(payload, from + 16 * next, to, 16 * ways);
    return state.digest();
  }

  /** Segment k's six digests into out[at ..), after a v3 pass over its first `groups` groups. */
  function finishSegment(payload: Uint8Array, layout: PayloadLayout, k: number, groups: number, out: Uint32Array, at: number): void {
    const span = computeSegmentSpans(layout, k);
    for (let j = 0; j < 2; j++) out[at + j] = finishStream(scratch.V3_CODES_LANES_AT[j]!, payload, span.codes, span.codesEnd, 2, j, groups);
    for (let j = 0; j < 4; j++) out[at + 2 + j] = finishStream(scratch.V3_SM_LANES_AT[j]!, payload, span.sm, span.smEnd, 4, j, 2 * groups);
  }

  /**
   * Finishes one sm stripe stream of format v2 (`parity` 0: even stripes, lanes at SM_LANES_AT; 1:
   * odd, SM_ODD_LANES_AT) whose lanes covered the groups in [from, hashedTo): whole groups are two
   * stripes each, so the rest of the span continues with an even stripe at hashedTo.
   */
  function finishStripes(parity: 0 | 1, payload: Uint8Array, from: number, hashedTo: number, to: number): number {
    const state = new Xxh32State(0);
    const l = (parity === 0 ? scratch.SM_LANES_AT : scratch.SM_ODD_LANES_AT) / 4;
    state.setLanes(u32[l]!, u32[l + 1]!, u32[l + 2]!, u32[l + 3]!, (hashedTo - from) / 2);
    state.updateStripes(payload, hashedTo + 16 * parity, to, 32);
    return state.digest();
  }

  /** The codes and sm digests after a hashing pass over `groups` whole groups, for format `version`. */
  function finishDigests(payload: Uint8Array, layout: { codes: number; sm: number; smEnd: number }, groups: number, version: number): BulkDigests {
    const { codes, sm, smEnd } = layout;
    const codesDigest = finishDigest(scratch.CODES_LANES_AT, payload, codes, codes + 16 * groups, sm);
    const smHashedTo = sm + GROUP_VALUES * groups;
    if (version >= 2) {
      return { codes: codesDigest, sm: finishStripes(0, payload, sm, smHashedTo, smEnd), smOdd: finishStripes(1, payload, sm, smHashedTo, smEnd) };
    }
    return { codes: codesDigest, sm: finishDigest(scratch.SM_LANES_AT, payload, sm, smHashedTo, smEnd) };
  }

  /** Finishes one digest whose lanes (at lanesAt) covered [from, hashedTo): the rest of the span is hashed here. */
  function finishDigest(lanesAt: number, payload: Uint8Array, from: number, hashedTo: number, to: number): number {
    const state = new Xxh32State(0);
    const l = lanesAt / 4;
    state.setLanes(u32[l]!, u32[l + 1]!, u32[l + 2]!, u32[l + 3]!, hashedTo - from);
    state.update(payload, hashedTo, to);
    return state.digest();
  }

  /**
   * Runs the decode kernel over values [from, to) into out[outOffset + (i - from)]; returns the
   * largest code seen. Blocks start on a 32-value group boundary, so a block's codes start on a
   * whole byte; whole groups of code and sm bytes lie inside their sections (padded to 256 bytes).
   * With `hash`, every group from `from` on is hashed in order (the caller decodes from 0 for v1
   * and v2, from a segment's start for v3: hash 3, one segment per call).
   */
  function decodeBlocks(
    payload: Uint8Array,
    codesOffset: number,
    smOffset: number,
    from: number,
    to: number,
    out: Uint16Array,
    outOffset: number,
    hash: number,
    written: ValuesWritten | undefined,
  ): number {
    const src = addressOf(payload);
    const dst = addressOf(out);
    let maxCode = 0;
    // Block lengths are whole even numbers of groups, so every block starts on an even group of a
    // v3 segment. A first block that starts before `from` goes through scratch: BLOCK_VALUES.
    for (let a = from - (from % GROUP_VALUES), b = a; a < to; a = b) {
      b = Math.min(a + (src >= 0 && dst >= 0 && a >= from ? IN_PLACE_BLOCK_VALUES : BLOCK_VALUES), to);
      const groups = Math.ceil((b - a) / GROUP_VALUES);
      let c = scratch.DEC_CODES_AT;
      let s = scratch.DEC_SM_AT;
      if (src >= 0) {
        c = src + codesOffset + a / 2;
        s = src + smOffset + a;
      } else {
        const codesFrom = codesOffset + a / 2;
        u8.set(payload.subarray(codesFrom, codesFrom + 16 * groups), scratch.DEC_CODES_AT);
        u8.set(payload.subarray(smOffset + a, smOffset + a + GROUP_VALUES * groups), scratch.DEC_SM_AT);
      }
      let m: number;
      if (dst >= 0 && a >= from) {
        // In place: whole groups straight into out, a last partial group through scratch.
        const full = Math.floor((b - a) / GROUP_VALUES);
        m = ex.decode(c, s, dst + 2 * (outOffset + a - from), full, hash);
        if (full < groups) {
          // v3: a block starts on an even group of its segment, so this group's parity is full's.
          const m2 = ex.decode(c + 16 * full, s + GROUP_VALUES * full, scratch.DEC_OUT_AT, 1, hash >= 3 ? 3 + (full & 1) : hash);
          if (m2 > m) m = m2;
          const done = a + GROUP_VALUES * full;
          out.set(u16.subarray(scratch.DEC_OUT_AT / 2, scratch.DEC_OUT_AT / 2 + (b - done)), outOffset + (done - from));
        }
      } else {
        m = ex.decode(c, s, scratch.DEC_OUT_AT, groups, hash);
        const lo = Math.max(a, from);
        out.set(u16.subarray(scratch.DEC_OUT_AT / 2 + (lo - a), scratch.DEC_OUT_AT / 2 + (b - a)), outOffset + (lo - from));
      }
      if (m > maxCode) maxCode = m;
      written?.(b);
    }
    return maxCode;
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
    written?: ValuesWritten,
  ): boolean {
    loadDecodeTables(tables);
    // Conservative: the first and last groups may include codes outside [from, to); the caller rechecks exactly.
    return decodeBlocks(payload, codesOffset, smOffset, from, to, out, outOffset, 0, written) < tables.size;
  }

  /**
   * Decodes all n values into out[0, n) and advances the codes and sm digests over the same bytes
   * (two independent chains in one loop); the spans' padding past the last group is hashed after.
   */
  function decodeAllWithDigests(
    payload: Uint8Array,
    layout: PayloadLayout,
    elementCount: number,
    out: Uint16Array,
    tables: CodebookTables,
    version: number,
    written?: ValuesWritten,
  ): { digests: BulkDigests; codesValid: boolean } {
    if (version >= 3) {
      const segments = new Uint32Array(SEGMENT_DIGESTS * countSegments(layout));
      const codesValid = decodeSegmentsWithDigests(payload, layout, 0, countSegments(layout), out, 0, tables, segments, written);
      return { digests: { codes: 0, sm: 0, segments }, codesValid };
    }
    loadDecodeTables(tables);
    startDigests();
    const codesAt = layout.codes.offsetBytes;
    const smAt = layout.sm.offsetBytes;
    const maxCode = decodeBlocks(payload, codesAt, smAt, 0, elementCount, out, 0, version >= 2 ? 2 : 1, written);
    const groups = Math.ceil(elementCount / GROUP_VALUES);
    const digests = finishDigests(payload, { codes: codesAt, sm: smAt, smEnd: layout.escapeIndex.offsetBytes }, groups, version);
    return { digests, codesValid: maxCode < tables.size };
  }

  /**
   * Decodes the values of segments [first, end) into out[outOffset ..) (escapes not applied) and
   * writes their six digests each into digests[0 ..), one fused pass a segment. Returns false if a
   * code >= codebook size may have been seen (conservative, as decodeValues).
   */
  function decodeSegmentsWithDigests(
    payload: Uint8Array,
    layout: PayloadLayout,
    first: number,
    end: number,
    out: Uint16Array,
    outOffset: number,
    tables: CodebookTables,
    digests: Uint32Array,
    written?: ValuesWritten,
  ): boolean {
    loadDecodeTables(tables);
    const n = layout.sm.byteLength;
    const codesAt = layout.codes.offsetBytes;
    const smAt = layout.sm.offsetBytes;
    let maxCode = 0;
    for (let k = first; k < end; k++) {
      const from = k * SEGMENT_VALUES;
      const to = Math.min(n, from + SEGMENT_VALUES);
      startDigests();
      const m = decodeBlocks(payload, codesAt, smAt, from, to, out, outOffset + (from - first * SEGMENT_VALUES), 3, written);
      if (m > maxCode) maxCode = m;
      finishSegment(payload, layout, k, Math.ceil((to - from) / GROUP_VALUES), digests, SEGMENT_DIGESTS * (k - first));
    }
    return maxCode < tables.size;
  }

  /** The six digests of each segment in [first, end) into out[0 ..) (format v3), hashing in place or block by block. */
  function segmentDigests(payload: Uint8Array, layout: PayloadLayout, first: number, end: number, out: Uint32Array): void {
    const n = layout.sm.byteLength;
    const codesAt = layout.codes.offsetBytes;
    const smAt = layout.sm.offsetBytes;
    const src = addressOf(payload);
    for (let k = first; k < end; k++) {
      const from = k * SEGMENT_VALUES;
      const to = Math.min(n, from + SEGMENT_VALUES);
      startDigests();
      // Blocks start on even groups of the segment (BLOCK_VALUES is an even number of groups).
      for (let a = from; a < to; a += BLOCK_VALUES) {
        const groups = Math.ceil((Math.min(a + BLOCK_VALUES, to) - a) / GROUP_VALUES);
        if (src >= 0) {
          ex.hash_groups(src + codesAt + a / 2, src + smAt + a, groups, 3);
        } else {
          u8.set(payload.subarray(codesAt + a / 2, codesAt + a / 2 + 16 * groups), scratch.DEC_CODES_AT);
          u8.set(payload.subarray(smAt + a, smAt + a + GROUP_VALUES * groups), scratch.DEC_SM_AT);
          ex.hash_groups(scratch.DEC_CODES_AT, scratch.DEC_SM_AT, groups, 3);
        }
      }
      finishSegment(payload, layout, k, Math.ceil((to - from) / GROUP_VALUES), out, SEGMENT_DIGESTS * (k - first));
    }
  }

  function bulkDigests(payload: Uint8Array, layout: PayloadLayout, version: number): BulkDigests {
    if (version >= 3) {
      const segments = new Uint32Array(SEGMENT_DIGESTS * countSegments(layout));
      segmentDigests(payload, layout, 0, countSegments(layout), segments);
      return { codes: 0, sm: 0, segments };
    }
    const mode = version >= 2 ? 2 : 1;
    startDigests();
    const codesAt = layout.codes.offsetBytes;
    const smAt = layout.sm.offsetBytes;
    const n = layout.sm.byteLength;
    const src = addressOf(payload);
    const totalGroups = Math.ceil(n / GROUP_VALUES);
    for (let a = 0; a < n; a += BLOCK_VALUES) {
      const groups = Math.ceil((Math.min(a + BLOCK_VALUES, n) - a) / GROUP_VALUES);
      if (src >= 0) {
        ex.hash_groups(src + codesAt + a / 2, src + smAt + a, groups, mode);
      } else {
        u8.set(payload.subarray(codesAt + a / 2, codesAt + a / 2 + 16 * groups), scratch.DEC_CODES_AT);
        u8.set(payload.subarray(smAt + a, smAt + a + GROUP_VALUES * groups), scratch.DEC_SM_AT);
        ex.hash_groups(scratch.DEC_CODES_AT, scratch.DEC_SM_AT, groups, mode);
      }
    }
    return finishDigests(payload, { codes: codesAt, sm: smAt, smEnd: layout.escapeIndex.offsetBytes }, totalGroups, version);
  }

  /**
   * The address of values [a, b) as whole groups: in place when they are in this memory and whole,
   * else copied into the encode input buffer with the last group padded by a code-0 value.
   */
  function valuesAt(values: Uint16Array, src: number, a: number, b: number, padValue: number): number {
    const groups = Math.ceil((b - a) / GROUP_VALUES);
    if (src >= 0 && (b - a) % GROUP_VALUES === 0) return src + 2 * a;
    u16.set(values.subarray(a, b), scratch.ENC_IN_AT / 2);
    u16.fill(padValue, scratch.ENC_IN_AT / 2 + (b - a), scratch.ENC_IN_AT / 2 + groups * GROUP_VALUES);
    return scratch.ENC_IN_AT;
  }

  function countEscapes(values: Uint16Array, tables: CodebookTables): number {
    const tableCount = loadEncodeTables(tables);
    const padValue = tables.exponents[0]! << 7;
    const n = values.length;
    const src = addressOf(values);
    let escapes = 0;
    for (let a = 0; a < n; a += BLOCK_VALUES) {
      const b = Math.min(n, a + BLOCK_VALUES);
      escapes += ex.count_escapes(valuesAt(values, src, a, b, padValue), Math.ceil((b - a) / GROUP_VALUES), tableCount);
    }
    return escapes;
  }

  function encodeSections(
    values: Uint16Array,
    tables: CodebookTables,
    payload: Uint8Array,
    at: EncodeOffsets,
    escapes: EscapeList,
    withDigests: boolean,
  ): BulkDigests | null {
    const tableCount = loadEncodeTables(tables);
    // Padding values get code 0 and sm byte 0: exactly the sections' zero padding.
    const padValue = tables.exponents[0]! << 7;
    const n = values.length;
    const src = addressOf(values);
    const dst = addressOf(payload);
    // The layout as the segment spans need it (only the offsets and n matter).
    const layout = encodeLayout(at, n);
    const segments = withDigests ? new Uint32Array(SEGMENT_DIGESTS * countSegments(layout)) : null;
    for (let a = 0; a < n; a += BLOCK_VALUES) {
      // Format v3 (what encode writes): a segment's chains start fresh at its first block.
      if (segments !== null && a % SEGMENT_VALUES === 0) startDigests();
      const b = Math.min(n, a + BLOCK_VALUES);
      const groups = Math.ceil((b - a) / GROUP_VALUES);
      const input = valuesAt(values, src, a, b, padValue);
      // Whole groups of codes and sm bytes fit in their sections (padded to 256 bytes).
      const c = dst >= 0 ? dst + at.codes + a / 2 : scratch.ENC_CODES_AT;
      const s = dst >= 0 ? dst + at.sm + a : scratch.ENC_SM_AT;
      const found = ex.encode(input, c, s, groups, scratch.ENC_ESC_INDEX_AT, scratch.ENC_ESC_EXP_AT, tableCount, segments !== null ? 1 : 0);
      // The kernel leaves the even and odd groups' lane sets exchanged after an odd group count.
      if (segments !== null && (groups & 1) === 1) swapParityLanes();
      if (dst < 0) {
        payload.set(u8.subarray(scratch.ENC_CODES_AT, scratch.ENC_CODES_AT + 16 * groups), at.codes + a / 2);
        payload.set(u8.subarray(scratch.ENC_SM_AT, scratch.ENC_SM_AT + GROUP_VALUES * groups), at.sm + a);
      }
      for (let j = 0; j < found; j++) escapes.push(a + u32[scratch.ENC_ESC_INDEX_AT / 4 + j]!, u8[scratch.ENC_ESC_EXP_AT + j]!);
      // A full segment's spans are all whole groups: finish it now (its lanes are reused next).
      if (segments !== null && b % SEGMENT_VALUES === 0) {
        const k = b / SEGMENT_VALUES - 1;
        finishSegment(payload, layout, k, SEGMENT_VALUES / GROUP_VALUES, segments, SEGMENT_DIGESTS * k);
      }
    }
    const groups = Math.ceil(n / GROUP_VALUES);
    payload.fill(0, at.codes + 16 * groups, at.codesEnd);
    payload.fill(0, at.sm + GROUP_VALUES * groups, at.smEnd);
    if (segments === null) return null;
    if (n % SEGMENT_VALUES !== 0) {
      // The short last segment, after its padding was zeroed.
      const k = Math.floor(n / SEGMENT_VALUES);
      finishSegment(payload, layout, k, groups - k * (SEGMENT_VALUES / GROUP_VALUES), segments, SEGMENT_DIGESTS * k);
    }
    return { codes: 0, sm: 0, segments };
  }

  /**
   * Adds the exponent histogram of `values` to `histogram` (256 counters). The kernel counts whole
   * runs of 4 values into its own tables (in place for a view in this memory, whatever its
   * alignment; else block by block through scratch), the last n mod 4 here. Every count wraps mod
   * 2^32 (u32 tables, then each sum stored into the Uint32Array), exactly as the JS loop's
   * `hist[e] + ...` store does, so both give the same histogram for any n.
   */
  function countExponents(values: Uint16Array, histogram: Uint32Array): void {
    const n = values.length;
    const whole = n - (n % 4);
    const src = addressOf(values);
    const tables = scratch.COUNT_TABLES_AT / 4;
    u32.fill(0, tables, tables + 256 * COUNT_TABLE_COUNT);
    if (src >= 0) {
      if (whole > 0) ex.count_exponents(src, whole / 4, scratch.COUNT_TABLES_AT);
    } else {
      for (let a = 0; a < whole; a += BLOCK_VALUES) {
        const b = Math.min(whole, a + BLOCK_VALUES);
        u16.set(values.subarray(a, b), scratch.COUNT_IN_AT / 2);
        ex.count_exponents(scratch.COUNT_IN_AT, (b - a) / 4, scratch.COUNT_TABLES_AT);
      }
    }
    for (let i = whole; i < n; i++) u32[tables + ((values[i]! >>> 7) & 0xff)]!++;
    for (let e = 0; e < 256; e++) {
      histogram[e] = histogram[e]! + u32[tables + e]! + u32[tables + 256 + e]! + u32[tables + 512 + e]! + u32[tables + 768 + e]!;
    }
  }

  const kernels: CodecKernels = {
    name: 'wasm-simd',
    countExponents,
    decodeValues,
    countEscapes,
    encodeSections,
    bulkDigests,
    decodeAllWithDigests,
    segmentDigests,
    decodeSegmentsWithDigests,
  };
  if (lock === undefined) return kernels;
  /**
   * An attached thread's calls hold its share's lock: the scratch area is this share's alone while
   * a call runs. Tables cached by this instance are loaded again when another attachment of the
   * share used the area since.
   */
  const guard = <A extends unknown[], R>(kernel: (...args: A) => R) =>
    (...args: A): R => {
      if (lock.enter()) {
        decodeTablesFor = null;
        encodeTablesFor = null;
      }
      try {
        return kernel(...args);
      } finally {
        lock.leave();
      }
    };
  return {
    name: 'wasm-simd',
    countExponents: guard(countExponents),
    decodeValues: guard(decodeValues),
    countEscapes: guard(countEscapes),
    encodeSections: guard(encodeSections),
    bulkDigests: guard(bulkDigests),
    decodeAllWithDigests: guard(decodeAllWithDigests),
    segmentDigests: guard(segmentDigests),
    decodeSegmentsWithDigests: guard(decodeSegmentsWithDigests),
  };
}
