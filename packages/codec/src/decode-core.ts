// The one decoder behind decode, decodeRange and decodeChunks: validates the escape index and
// escape stream of every chunk it touches, so no byte of the payload can steer a read or write
// outside the payload or the output.
import { argumentTypeError } from './argument-type-error.js';
import { kernelsFor, prepareCodebookTables, type CodebookTables, type ValuesWritten } from './backend.js';
import { isUint8Array } from './typed-array-kind.js';
import { isValidChunkSize, layoutFor, type PayloadLayout } from './compute-payload-layout.js';
import { HEADER_OFFSET, MAX_ELEMENT_COUNT } from './constants.js';
import { ensureCodebook } from './create-codebook.js';
import { SplitZipError } from './errors.js';
import { readU32, readU64 } from './payload-header.js';
import type { PayloadMeta } from './read-payload-meta.js';

const tablesCache = new Map<string, CodebookTables>();

/** Tables per distinct codebook; a small cache because a model has few distinct codebooks. */
export function tablesForCodebook(exponents: readonly number[]): CodebookTables {
  const key = exponents.join(',');
  let tables = tablesCache.get(key);
  if (tables === undefined) {
    if (tablesCache.size >= 256) tablesCache.clear();
    tables = prepareCodebookTables(exponents);
    tablesCache.set(key, tables);
  }
  return tables;
}

/**
 * The escapes of one decode: checked before any value is written, then patched into out as the
 * kernels report values written (`apply`, in increasing order), so each patch hits a cache line
 * the kernel has just written. `error` is the first rule the escape index or positions break
 * (null if none); with an error `apply` writes nothing.
 */
export interface PreparedEscapes {
  readonly error: SplitZipError | null;
  readonly apply: ValuesWritten;
}

const NO_ESCAPES: PreparedEscapes = { error: null, apply: () => {} };

/**
 * Checks the escapes of values [start, end) (within the payload; out holds end - start values
 * from outOffset) and returns their patcher. An empty range has nothing to check, as in
 * decodeValueRange.
 */
export function prepareEscapes(
  payload: Uint8Array,
  meta: PayloadMeta,
  start: number,
  end: number,
  out: Uint16Array,
  outOffset: number,
): PreparedEscapes {
  if (end <= start) return meta.elementCount === 0 ? emptyTensorEscapes(payload, meta) : NO_ESCAPES;
  const firstChunk = Math.floor(start / meta.chunkSize);
  const lastChunk = Math.floor((end - 1) / meta.chunkSize);
  const index = escapeIndexWords(payload, meta, firstChunk, lastChunk);
  const error = findEscapeError(payload, meta, index, firstChunk, lastChunk);
  if (error !== null) return { error, apply: NO_ESCAPES.apply };
  if (index[firstChunk] === index[lastChunk + 1]) return NO_ESCAPES;
  return { error: null, apply: escapePatcher(payload, meta, index, firstChunk, lastChunk, start, end, out, outOffset) };
}

/**
 * Decodes values [start, end) of the payload into out[outOffset ..). The caller has checked
 * 0 <= start <= end <= n, out's length, and payload.length >= meta.compBytes. With `decoded`, the
 * codes and sm were already decoded into out (by a fused decode-and-checksum kernel that was
 * given `decoded.escapes.apply`). Payload and out must not overlap.
 */
export function decodeValueRange(
  payload: Uint8Array,
  meta: PayloadMeta,
  start: number,
  end: number,
  out: Uint16Array,
  outOffset: number,
  decoded?: { codesValid: boolean; escapes: PreparedEscapes },
): void {
  if (end <= start) {
    // An empty tensor's index is its two ends (reader rule 8), checked as for any other tensor.
    if (meta.elementCount === 0) {
      const { error } = decoded?.escapes ?? emptyTensorEscapes(payload, meta);
      if (error !== null) throw error;
    }
    return;
  }
  const { layout, elementCount } = meta;
  const escapes = decoded?.escapes ?? prepareEscapes(payload, meta, start, end, out, outOffset);
  if (escapes.error !== null) throw escapes.error;

  const tables = tablesForCodebook(meta.codebook.exponents);
  const codesValid =
    decoded?.codesValid ??
    kernelsFor(payload, out).decodeValues(payload, layout.codes.offsetBytes, layout.sm.offsetBytes, start, end, out, outOffset, tables, escapes.apply);
  // The kernels' check is conservative (whole bytes, whole groups): confirm exactly before failing.
  if (!codesValid) {
    const error = invalidCodeError(payload, meta, start, end, tables.size);
    if (error !== null) throw error;
  }
  if (end === elementCount && (elementCount & 1) === 1) {
    const padding = payload[layout.codes.offsetBytes + (elementCount >>> 1)]! >>> 4;
    if (padding !== 0) {
      throw new SplitZipError('INVALID_CODE', 'the padding nibble after the last code must be 0', {
        offsetBytes: layout.codes.offsetBytes + (elementCount >>> 1),
        nibble: padding,
      });
    }
  }
  // The escapes of values the kernels did not report (all of them for kernels without reports).
  escapes.apply(end);
}

/** The escapes of a tensor of no values: none, once its index says so (index[0] = 0 = escape_count). */
function emptyTensorEscapes(payload: Uint8Array, meta: PayloadMeta): PreparedEscapes {
  const error = findEscapeError(payload, meta, escapeIndexWords(payload, meta, 0, -1), 0, -1);
  return error === null ? NO_ESCAPES : { error, apply: NO_ESCAPES.apply };
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * The escape index (chunk_count + 1 u32) as a Uint32Array: a view in place when aligned on a
 * little-endian platform (the usual case), else a copy of the entries a decode of chunks
 * [firstChunk, lastChunk] reads (0, chunk_count and firstChunk..lastChunk + 1; the rest stay 0), so
 * a short range costs no more than its chunks. Plain typed-array reads keep the per-chunk loops
 * below tight: a 2^24-value tensor has 16,384 chunks, walked twice per decode.
 */
function escapeIndexWords(payload: Uint8Array, meta: PayloadMeta, firstChunk: number, lastChunk: number): Uint32Array {
  const at = meta.layout.escapeIndex.offsetBytes;
  const count = meta.chunkCount + 1;
  if (LITTLE_ENDIAN && ((payload.byteOffset + at) & 3) === 0) return new Uint32Array(payload.buffer, payload.byteOffset + at, count);
  const words = new Uint32Array(count);
  words[0] = readU32(payload, at);
  words[count - 1] = readU32(payload, at + 4 * (count - 1));
  for (let c = firstChunk; c <= lastChunk + 1; c++) words[c] = readU32(payload, at + 4 * c);
  return words;
}

/**
 * Escape index: index[0] = 0 and index[chunk_count] = escape_count always; the touched chunks'
 * entries non-decreasing, within escape_count, at most the chunk's length apart. Escape positions:
 * strictly increasing within a chunk and below its length.
 */
function findEscapeError(payload: Uint8Array, meta: PayloadMeta, index: Uint32Array, firstChunk: number, lastChunk: number): SplitZipError | null {
  const { layout, chunkSize, chunkCount, escapeCount, elementCount } = meta;
  if (index[0] !== 0 || index[chunkCount] !== escapeCount) {
    return new SplitZipError('BAD_ESCAPE_INDEX', 'escape index must start at 0 and end at escape_count', {
      first: index[0],
      last: index[chunkCount],
      escapeCount,
    });
  }
  const posAt = layout.escapePositions.offsetBytes;
  let prev = index[firstChunk]!;
  for (let c = firstChunk; c <= lastChunk; c++) {
    const next = index[c + 1]!;
    if (next === prev) continue;
    const chunkLength = Math.min(chunkSize, elementCount - c * chunkSize);
    if (next < prev || next > escapeCount || next - prev > chunkLength) {
      return new SplitZipError('BAD_ESCAPE_INDEX', `escape index of chunk ${c} is inconsistent`, {
        chunk: c,
        indexStart: prev,
        indexEnd: next,
        escapeCount,
        chunkLength,
        offsetBytes: layout.escapeIndex.offsetBytes + 4 * (c + 1),
      });
    }
    let last = -1;
    for (let j = prev; j < next; j++) {
      const pos = payload[posAt + 2 * j]! | (payload[posAt + 2 * j + 1]! << 8);
      if (pos <= last || pos >= chunkLength) {
        return new SplitZipError('BAD_ESCAPE_POSITION', `escape ${j} of chunk ${c} is out of order or outside the chunk`, {
          chunk: c,
          escape: j,
          position: pos,
          previousPosition: last,
          chunkLength,
          offsetBytes: posAt + 2 * j,
        });
      }
      last = pos;
    }
    prev = next;
  }
  return null;
}

/**
 * Replaces the exponent of every escaped value in [start, end) below each reported end, in order
 * (index and positions already checked). State: chunk c, its escapes [j, jEnd) not yet applied.
 */
function escapePatcher(
  payload: Uint8Array,
  meta: PayloadMeta,
  index: Uint32Array,
  firstChunk: number,
  lastChunk: number,
  start: number,
  end: number,
  out: Uint16Array,
  outOffset: number,
): ValuesWritten {
  const { layout, chunkSize } = meta;
  const posAt = layout.escapePositions.offsetBytes;
  const expAt = layout.escapeExponents.offsetBytes;
  // Ends clamped to escape_count: the index is read in place, so memory changed under a decode
  // must not make a loop run ~2^32 times.
  const escapeCount = meta.escapeCount;
  let c = firstChunk;
  let j = index[c]!;
  let jEnd = Math.min(index[c + 1]!, escapeCount);
  return (endValue) => {
    const limit = Math.min(endValue, end);
    for (;;) {
      if (j < jEnd) {
        const chunkStart = c * chunkSize;
        do {
          const i = chunkStart + (payload[posAt + 2 * j]! | (payload[posAt + 2 * j + 1]! << 8));
          if (i >= limit) return;
          if (i >= start) {
            const o = outOffset + (i - start);
            out[o] = (out[o]! & 0x807f) | (payload[expAt + j]! << 7);
          }
          j++;
        } while (j < jEnd);
      }
      // Chunk c is done (j === index[c + 1]): on to the next chunk that has escapes, if it starts
      // below the limit.
      const next = nextChunkWithEscapes(index, c, Math.min(lastChunk, Math.ceil(limit / chunkSize) - 1));
      if (next < 0) {
        // None before the limit: resume from the last chunk looked at (all empty up to it).
        c = -next - 1;
        jEnd = Math.min(index[c + 1]!, escapeCount);
        return;
      }
      c = next;
      jEnd = Math.min(index[c + 1]!, escapeCount);
    }
  };
}

/**
 * The first chunk after c, up to lastChunk, that has escapes; if none, -(the last chunk looked at)
 * - 1. A plain loop over the index (most chunks of real weights have no escapes), kept out of the
 * patcher's closure, whose state lives in its context rather than in registers.
 */
function nextChunkWithEscapes(index: Uint32Array, c: number, lastChunk: number): number {
  const j = index[c + 1]!;
  let k = c + 1;
  while (k <= lastChunk && index[k + 1] === j) k++;
  return k <= lastChunk ? k : -Math.max(c, lastChunk) - 1;
}

function invalidCodeError(
  payload: Uint8Array,
  meta: PayloadMeta,
  start: number,
  end: number,
  size: number,
): SplitZipError | null {
  const codesAt = meta.layout.codes.offsetBytes;
  for (let i = start; i < end; i++) {
    const b = payload[codesAt + (i >>> 1)]!;
    const code = (i & 1) === 0 ? b & 15 : b >>> 4;
    if (code >= size) {
      return new SplitZipError('INVALID_CODE', `value ${i} has code ${code}, codebook has ${size} entries`, {
        index: i,
        code,
        codebookSize: size,
        offsetBytes: codesAt + (i >>> 1),
      });
    }
  }
  return null;
}

/** Checks that a caller-supplied meta is self-consistent and fits this payload, so offsets derived from it stay inside. */
export function checkMetaFitsPayload(payload: Uint8Array, meta: PayloadMeta): void {
  if (!isUint8Array(payload)) {
    throw argumentTypeError('payload', 'a Uint8Array', payload);
  }
  if (
    meta === null ||
    typeof meta !== 'object' ||
    !Number.isInteger(meta.elementCount) ||
    meta.elementCount < 0 ||
    meta.elementCount > MAX_ELEMENT_COUNT ||
    !Number.isInteger(meta.escapeCount) ||
    meta.escapeCount < 0 ||
    meta.escapeCount > meta.elementCount ||
    !isValidChunkSize(meta.chunkSize) ||
    meta.chunkCount !== Math.ceil(meta.elementCount / meta.chunkSize) ||
    !sameLayout(meta.layout, layoutFor(meta.elementCount, meta.escapeCount, meta.chunkSize)) ||
    meta.compBytes !== meta.layout.totalBytes
  ) {
    throw argumentTypeError('meta', 'a PayloadMeta from readPayloadMeta', meta);
  }
  ensureCodebook(meta.codebook);
  if (payload.length < meta.compBytes) {
    throw new SplitZipError('TRUNCATED', 'payload is shorter than its meta says', {
      payloadBytes: payload.length,
      totalBytes: meta.compBytes,
    });
  }
}

/**
 * For the decoders given a meta (decodeChunks, decodeSegments), after checkMetaFitsPayload: a
 * self-consistent meta of another payload (or an edited one) would decode with the wrong codebook
 * or index without a word, so it must say what this payload's header says. O(1). (The checksum
 * functions leave this to the checksum, which covers the header: a flip there is a mismatch.)
 */
export function checkMetaMatchesHeader(payload: Uint8Array, meta: PayloadMeta): void {
  const h = HEADER_OFFSET;
  const exponents = meta.codebook.exponents;
  let same =
    meta.version === (payload[h.version]! | (payload[h.version + 1]! << 8)) &&
    meta.elementCount === readU64(payload, h.elementCount) &&
    meta.chunkSize === readU32(payload, h.chunkSize) &&
    meta.escapeCount === readU64(payload, h.escapeCount) &&
    meta.checksum === readU32(payload, h.checksum) &&
    exponents.length === payload[h.codebookSize];
  for (let k = 0; same && k < exponents.length; k++) same = exponents[k] === payload[h.codebook + k];
  if (!same) {
    throw new SplitZipError('INVALID_ARGUMENT', "meta does not match this payload's header (a meta of another payload?)", {
      argument: 'meta',
    });
  }
}

function sameLayout(a: PayloadLayout, b: PayloadLayout): boolean {
  if (a === null || typeof a !== 'object' || a.totalBytes !== b.totalBytes) return false;
  for (const name of ['codes', 'sm', 'escapeIndex', 'escapePositions', 'escapeExponents'] as const) {
    const x = a[name];
    const y = b[name];
    if (x === null || typeof x !== 'object' || x.offsetBytes !== y.offsetBytes || x.byteLength !== y.byteLength) return false;
  }
  return true;
}
