import { describeValue } from './describe-value.js';
import { argumentTypeError } from './argument-type-error.js';
import { kernelsFor, type CodecKernels } from './backend.js';
import { checkReadableView, isUint16Array, isUint8Array } from './typed-array-kind.js';
import { allocateArray } from './allocate-array.js';
import { readOptions } from './check-options.js';
import { optionNamesOf } from './find-unknown-option.js';
import { checkNoOverlap } from './check-overlap.js';
import { layoutFor, isValidChunkSize, type PayloadLayout } from './compute-payload-layout.js';
import { DEFAULT_CHUNK_SIZE, FORMAT_VERSION, HEADER_OFFSET, MAX_ELEMENT_COUNT } from './constants.js';
import { ensureCodebook, type Codebook } from './create-codebook.js';
import { tablesForCodebook } from './decode-core.js';
import { SplitZipError } from './errors.js';
import { EscapeList } from './escape-list.js';
import { computePayloadChecksum, type BulkDigests } from './payload-checksum.js';
import { writePayloadHeader, writeU32 } from './payload-header.js';

export interface EncodeOptions {
  /** Values per chunk: a power of two in 64..65536 (default 1024). */
  chunkSize?: number | undefined;
  /**
   * The number of values whose exponent is not in the codebook, when already known (e.g.
   * `calibrateFromHistogram(...).escapeCount` for these values): saves the counting pass of an
   * encode without `out`. A wrong count costs a second pass, never a wrong payload.
   */
  escapeCount?: number | undefined;
  /**
   * Encode into this buffer instead of a new one: one pass, no counting pass, no allocation. It
   * must hold the payload (`computePayloadLayout(n, escapeCount).totalBytes`, at least the
   * escape-free size up front, else OUTPUT_TOO_SMALL); the result is `out.subarray(0, totalBytes)`.
   * Bytes past the payload are left as they were. In a codec arena (with `values` there too) the
   * kernels work in place, without copies.
   */
  out?: Uint8Array | undefined;
}

const ENCODE_OPTION_NAMES = optionNamesOf<EncodeOptions>({ chunkSize: true, escapeCount: true, out: true });

/**
 * Encodes BF16 bit patterns into one aligned SplitZip payload (FORMAT.md). Typed by where the
 * payload lives: a new payload is a plain ArrayBuffer's (fit for Blob, Response, crypto.subtle),
 * one encoded into `out` shares out's buffer.
 */
export function encode(values: Uint16Array, codebook: Codebook, options?: (EncodeOptions & { out?: undefined }) | null): Uint8Array<ArrayBuffer>;
export function encode<TBuffer extends ArrayBufferLike>(
  values: Uint16Array,
  codebook: Codebook,
  options: EncodeOptions & { out: Uint8Array<TBuffer> },
): Uint8Array<TBuffer>;
export function encode(values: Uint16Array, codebook: Codebook, options?: EncodeOptions | null): Uint8Array;
export function encode(values: Uint16Array, codebook: Codebook, encodeOptions?: EncodeOptions | null): Uint8Array {
  const options = readOptions(encodeOptions, 'options', ENCODE_OPTION_NAMES);
  if (!isUint16Array(values)) {
    throw argumentTypeError('values', 'a Uint16Array of BF16 bit patterns', values);
  }
  // A detached or out-of-bounds array reads as empty: a valid empty payload would hide the caller's bug.
  checkReadableView(values, 'values');
  if (values.length > MAX_ELEMENT_COUNT) {
    throw new SplitZipError('INVALID_ARGUMENT', `at most ${MAX_ELEMENT_COUNT} values per payload`, {
      elementCount: values.length,
    });
  }
  // Only undefined means the default: a null chunkSize is refused like a null escapeCount.
  const chunkSize = options?.chunkSize === undefined ? DEFAULT_CHUNK_SIZE : options.chunkSize;
  if (!isValidChunkSize(chunkSize)) {
    throw new SplitZipError('INVALID_ARGUMENT', `chunkSize must be a power of two in 64..65536, got ${describeValue(chunkSize)}`, { chunkSize, got: describeValue(chunkSize) });
  }
  const hint = options?.escapeCount;
  if (hint !== undefined && (!Number.isInteger(hint) || hint < 0 || hint > values.length)) {
    throw new SplitZipError('INVALID_ARGUMENT', `escapeCount must be an integer in 0..${values.length} (values.length), got ${describeValue(hint)}`, {
      escapeCount: hint,
      got: describeValue(hint),
      elementCount: values.length,
    });
  }
  const out = options?.out;
  if (out !== undefined && !isUint8Array(out)) {
    throw argumentTypeError('options.out', 'a Uint8Array', out);
  }
  if (out !== undefined) checkReadableView(out, 'out');
  // The kernels would write codes over values they have yet to read: a valid-looking wrong
  // payload. Only the bytes the largest payload (every value escaped) could use count.
  if (out !== undefined) {
    const written = Math.min(out.length, layoutFor(values.length, values.length, chunkSize).totalBytes);
    checkNoOverlap(values, values.byteLength, out, written, 'out overlaps values');
  }
  const book = ensureCodebook(codebook);
  const n = values.length;
  const kernels = kernelsFor(values, out, 'values', 'out');
  const escapes = new EscapeList();
  if (out !== undefined) {
    // Codes, sm and escape index sit at offsets that do not depend on the escape count: one pass
    // writes them and collects the escapes; only then is the payload's length known.
    // The escape-free size up front (what the pass writes); the hint is unchecked, so a high one
    // must not refuse an `out` that holds the payload (it did: OUTPUT_TOO_SMALL).
    const escapeFree = layoutFor(n, 0, chunkSize);
    if (out.length < escapeFree.totalBytes) {
      // The error names the payload's real size, not the escape-free one (a caller who retried
      // with that was refused again): counting costs one pass, on this error path only.
      const counted = kernels.countEscapes(values, tablesForCodebook(book.exponents));
      throw outTooSmall(out, Math.max(escapeFree.totalBytes, layoutFor(n, counted, chunkSize).totalBytes), counted, chunkSize);
    }
    const digests = encodeSections(kernels, values, book, out, escapeFree, escapes);
    const layout = layoutFor(n, escapes.count, chunkSize);
    if (out.length < layout.totalBytes) throw outTooSmall(out, layout.totalBytes, escapes.count, chunkSize);
    finishPayload(out, values.length, book, chunkSize, layout, escapes, digests);
    return out.subarray(0, layout.totalBytes);
  }
  // Without `out` the payload is allocated at its exact size, so the count comes first.
  const tables = tablesForCodebook(book.exponents);
  const escapeCount = hint ?? kernels.countEscapes(values, tables);
  const payload = encodeCounted(kernels, values, book, chunkSize, escapeCount, escapes);
  if (payload !== undefined) return payload;
  // A wrong escapeCount hint gets here once: encode again with the count measured. A second
  // disagreement means the values changed while being read (another thread writing them): stop,
  // rather than retry without end.
  const measured = kernels.countEscapes(values, tables);
  const again = new EscapeList();
  const retried = encodeCounted(kernels, values, book, chunkSize, measured, again);
  if (retried !== undefined) return retried;
  throw new SplitZipError('INVALID_ARGUMENT', 'values changed while encode read them (escape counts of two passes differ)', {
    argument: 'values',
    countedEscapes: measured,
    encodedEscapes: again.count,
  });
}

/** A payload sized for `escapeCount` escapes, or undefined when the values hold another count. */
function encodeCounted(
  kernels: CodecKernels,
  values: Uint16Array,
  book: Codebook,
  chunkSize: number,
  escapeCount: number,
  escapes: EscapeList,
): Uint8Array | undefined {
  const layout = layoutFor(values.length, escapeCount, chunkSize);
  const payload = allocateArray(Uint8Array, layout.totalBytes, 'the payload', 'bytes');
  const digests = encodeSections(kernels, values, book, payload, layout, escapes);
  if (escapes.count !== escapeCount) return undefined;
  finishPayload(payload, values.length, book, chunkSize, layout, escapes, digests);
  return payload;
}

/** OUTPUT_TOO_SMALL for an `out` shorter than the payload, with its exact size and how to get it up front. */
function outTooSmall(out: Uint8Array, needed: number, escapeCount: number, chunkSize: number): SplitZipError {
  return new SplitZipError(
    'OUTPUT_TOO_SMALL',
    `out holds ${out.length} bytes, the payload needs ${needed} (${escapeCount} escapes; computePayloadLayout(n, escapeCount, chunkSize).totalBytes gives the size before encoding)`,
    { outBytes: out.length, needed, escapeCount, chunkSize },
  );
}

function encodeSections(
  kernels: CodecKernels,
  values: Uint16Array,
  book: Codebook,
  payload: Uint8Array,
  layout: PayloadLayout,
  escapes: EscapeList,
): BulkDigests | null {
  const at = {
    codes: layout.codes.offsetBytes,
    codesEnd: layout.sm.offsetBytes,
    sm: layout.sm.offsetBytes,
    smEnd: layout.escapeIndex.offsetBytes,
  };
  return kernels.encodeSections(values, tablesForCodebook(book.exponents), payload, at, escapes, true);
}

/** Writes the escape index and stream (padding zeroed), the header and the checksum. */
function finishPayload(
  payload: Uint8Array,
  n: number,
  book: Codebook,
  chunkSize: number,
  layout: PayloadLayout,
  escapes: EscapeList,
  digests: BulkDigests | null,
): void {
  const { escapeIndex, escapePositions, escapeExponents } = layout;
  const count = escapes.count;
  const indices = escapes.indices;
  const chunkCount = Math.ceil(n / chunkSize);
  // index[c] = escapes before chunk c: one merge over chunks and escapes (both in value order).
  let j = 0;
  for (let c = 0; c <= chunkCount; c++) {
    const chunkStart = c * chunkSize;
    while (j < count && indices[j]! < chunkStart) j++;
    writeU32(payload, escapeIndex.offsetBytes + 4 * c, j);
  }
  payload.fill(0, escapeIndex.offsetBytes + escapeIndex.byteLength, escapePositions.offsetBytes);
  const mask = chunkSize - 1; // chunk sizes are powers of two
  for (let k = 0; k < count; k++) {
    const pos = indices[k]! & mask;
    payload[escapePositions.offsetBytes + 2 * k] = pos & 0xff;
    payload[escapePositions.offsetBytes + 2 * k + 1] = pos >>> 8;
  }
  payload.fill(0, escapePositions.offsetBytes + escapePositions.byteLength, escapeExponents.offsetBytes);
  payload.set(escapes.exponents.subarray(0, count), escapeExponents.offsetBytes);
  payload.fill(0, escapeExponents.offsetBytes + escapeExponents.byteLength, layout.totalBytes);
  writePayloadHeader(payload, n, count, chunkSize, book, layout);
  writeU32(payload, HEADER_OFFSET.checksum, computePayloadChecksum(payload, layout, FORMAT_VERSION, digests));
}
