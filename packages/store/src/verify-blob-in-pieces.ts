// verify's check of a large version-3 payload without holding it whole: the checksum is built from
// per-segment digests (FORMAT.md "Version 3: segments"), so each segment's codes and sm spans are
// read into a payload of that segment alone (a one-segment payload whose spans are the same bytes,
// so the codec's computeSegmentDigests gives the same six digests), the escape sections are hashed
// as they stream by, and the list is combined as the codec does. With `decode`, each segment's
// payload also gets its chunks' escapes and is decoded and hashed into the tensor's digests.
import {
  computePayloadLayout,
  computeSegmentDigests,
  computeSegmentSpans,
  createCodebook,
  createPayloadWriter,
  createXxh32Stream,
  HEADER_BYTES,
  readPayloadMeta,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  SplitZipError,
  xxh32,
  type PayloadMeta,
} from '@splitzip/codec';
import { createHash } from 'node:crypto';
import type { BlobRangeReader } from './blob-range-reader.js';
import { blobCorruptError, checkMetaAgainstEntry } from './check-blob-payload.js';
import { StoreError } from './errors.js';
import { ESCAPE_ERROR_CODES, finishDecodedHashes, hashDecodedValues, startDecodedHashes, type DecodedDigests, type DecodedTensorInfo } from './hash-decoded-blocks.js';
import { VERIFY_READ_PIECE_BYTES } from './limits.js';
import type { CacheEntry } from './types.js';

export interface PieceCheckOptions {
  /** Decode and hash the tensor (verify({ decode: true })). */
  decode?: DecodedTensorInfo | undefined;
  /** Decoded values per decode block (VERIFY_DECODE_BLOCK_BYTES / 2). */
  block: Uint16Array;
}

/**
 * Checks `entry`'s blob as verify's whole read does, in the same order and with the same codes
 * (header BLOB_CORRUPT, checksum BLOB_CORRUPT, META_MISMATCH, blob SHA-256 BLOB_CORRUPT, a decode
 * failure BLOB_CORRUPT), reading at most VERIFY_READ_PIECE_BYTES at a time. Returns the decoded
 * digests (with `decode`), or 'whole' where the header's version or size differs from the
 * manifest's (a damaged or foreign blob of another layout: the caller checks it whole, as before).
 */
export async function checkBlobInPieces(reader: BlobRangeReader, entry: CacheEntry, options: PieceCheckOptions): Promise<DecodedDigests | undefined | 'whole'> {
  const read = (target: Uint8Array, position: number) => readInPieces(reader, target, position);
  const header = new Uint8Array(HEADER_BYTES);
  await read(header, 0);
  const meta = readHeaderMeta(entry, header);
  if (meta === undefined) return 'whole';
  const { layout, elementCount: n, chunkSize } = meta;
  const segmentCount = Math.ceil(n / SEGMENT_VALUES);
  const digests = new Uint32Array(SEGMENT_DIGESTS * segmentCount);
  const hashes = options.decode === undefined ? undefined : startDecodedHashes(options.decode);
  // A whole decode checks every chunk's escapes before any code: an escape error of a later
  // segment is the one reported before a code error of an earlier one (hash-decoded-blocks.ts).
  let escapeError: SplitZipError | SegmentDecodeFailure | undefined;
  let otherError: SegmentDecodeFailure | undefined;
  let plain: { writer: ReturnType<typeof createPayloadWriter>; meta: PayloadMeta } | undefined;
  for (let k = 0; k < segmentCount; k++) {
    const span = computeSegmentSpans(layout, k);
    const values = Math.min(SEGMENT_VALUES, n - k * SEGMENT_VALUES);
    const escapes = hashes !== undefined && escapeError === undefined ? await readSegmentEscapeIndex(read, meta, k, values) : undefined;
    if (escapes instanceof SplitZipError) escapeError = escapes;
    const escapeCount = escapes instanceof Uint32Array ? escapes[escapes.length - 1]! - escapes[0]! : 0;
    // One segment's payload: its header is the codec's for (values, escapes), its spans this segment's bytes.
    let segment = plain;
    if (segment === undefined || escapeCount > 0 || segment.meta.elementCount !== values) {
      const writer = createPayloadWriter(values, escapeCount, meta.codebook, chunkSize);
      segment = { writer, meta: readPayloadMeta(writer.bytes) };
      if (escapeCount === 0) plain = segment;
    }
    const bytes = segment.writer.bytes;
    const own = segment.meta.layout;
    if (own.sm.offsetBytes - own.codes.offsetBytes !== span.codesEnd - span.codes || own.escapeIndex.offsetBytes - own.sm.offsetBytes !== span.smEnd - span.sm) {
      throw new StoreError('IO_ERROR', 'internal: a segment payload does not match its segment spans', { entry: entry.key, details: { segment: k } });
    }
    await read(bytes.subarray(own.codes.offsetBytes, own.sm.offsetBytes), span.codes);
    await read(bytes.subarray(own.sm.offsetBytes, own.escapeIndex.offsetBytes), span.sm);
    digests.set(computeSegmentDigests(bytes, segment.meta, 0, 1), SEGMENT_DIGESTS * k);
    if (hashes === undefined || !(escapes instanceof Uint32Array)) continue;
    const first = escapes[0]!;
    for (let c = 0; c < escapes.length; c++) segment.writer.escapeIndex[c] = escapes[c]! - first;
    const positions = segment.writer.escapePositions;
    await read(new Uint8Array(positions.buffer, positions.byteOffset, positions.byteLength), layout.escapePositions.offsetBytes + 2 * first);
    await read(segment.writer.escapeExponents, layout.escapeExponents.offsetBytes + first);
    try {
      hashDecodedValues(bytes, values, options.block, hashes);
    } catch (error) {
      // The codec counts values and chunks from the segment's start: the message says from where.
      const where = { error, segment: k, value: k * SEGMENT_VALUES, chunk: (k * SEGMENT_VALUES) / chunkSize };
      if (ESCAPE_ERROR_CODES.has((error as { code?: unknown } | null)?.code)) escapeError = where;
      else otherError ??= where;
    }
  }
  const checksum = combineChecksum(header, digests, await hashEscapeSpans(read, meta));
  if (checksum !== meta.checksum) {
    const mismatch = new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its contents', { storedChecksum: meta.checksum, computedChecksum: checksum });
    throw blobCorruptError(entry, 'blob checksum fails', mismatch);
  }
  checkMetaAgainstEntry(entry, meta);
  if (entry.blobSha256 !== null && (await hashBlobSha256(read, meta.compBytes)) !== entry.blobSha256) {
    throw new StoreError('BLOB_CORRUPT', 'blob SHA-256 differs from the manifest blob_sha256', { entry: entry.key });
  }
  if (hashes === undefined) return undefined;
  const failure = escapeError ?? otherError;
  if (failure !== undefined) {
    const where = failure instanceof SplitZipError ? '' : `in segment ${failure.segment}, whose values and chunks count from value ${failure.value} and chunk ${failure.chunk}: `;
    const error = failure instanceof SplitZipError ? failure : failure.error;
    throw new StoreError('BLOB_CORRUPT', `blob does not decode: ${where}${(error as Error).message}`, { entry: entry.key, cause: error });
  }
  return finishDecodedHashes(hashes);
}

/** Reads all of `target` from `position`, never more than VERIFY_READ_PIECE_BYTES at once. */
async function readInPieces(reader: BlobRangeReader, target: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < target.length; done += VERIFY_READ_PIECE_BYTES) {
    await reader.read(target.subarray(done, Math.min(target.length, done + VERIFY_READ_PIECE_BYTES)), position + done);
  }
}

type Read = (target: Uint8Array, position: number) => Promise<void>;

/** A codec error decoding one segment's payload, and where that segment starts. */
interface SegmentDecodeFailure {
  error: unknown;
  segment: number;
  value: number;
  chunk: number;
}

/**
 * The payload's meta from its 256 header bytes, judged by the codec's header rules as a whole read
 * would judge them (BLOB_CORRUPT, the same codec error); undefined where the header is valid but
 * not a version-3 payload of the blob's size: another layout, checked whole by the caller.
 */
function readHeaderMeta(entry: CacheEntry, header: Uint8Array): PayloadMeta | undefined {
  try {
    readPayloadMeta(header);
  } catch (error) {
    // Rule 6 (the payload holds total_bytes) comes last: every other rule passed.
    if ((error as { code?: unknown } | null)?.code !== 'TRUNCATED') throw blobCorruptError(entry, 'blob header is invalid', error);
  }
  const view = new DataView(header.buffer, header.byteOffset, HEADER_BYTES);
  const u64 = (at: number) => Number(view.getBigUint64(at, true));
  const totalBytes = u64(136);
  if (totalBytes > entry.compBytes) {
    // As a whole read of the blob reports it (rule 6 against the blob's length).
    const short = new SplitZipError('TRUNCATED', `payload is ${entry.compBytes} bytes, header says ${totalBytes}`, { payloadBytes: entry.compBytes, totalBytes });
    throw blobCorruptError(entry, 'blob header is invalid', short);
  }
  const version = view.getUint16(4, true);
  if (version !== 3 || totalBytes !== entry.compBytes) return undefined;
  const chunkSize = view.getUint32(12, true);
  const elementCount = u64(16);
  const escapeCount = u64(24);
  return {
    version,
    elementCount,
    chunkSize,
    chunkCount: view.getUint32(32, true),
    escapeCount,
    codebook: createCodebook(Array.from(header.subarray(40, 40 + header[36]!))),
    layout: computePayloadLayout(elementCount, escapeCount, chunkSize),
    compBytes: totalBytes,
    rawBytes: 2 * elementCount,
    checksum: view.getUint32(252, true),
  };
}

/**
 * The escape index entries of segment `k`'s chunks (its first chunk's to its end's, inclusive), or
 * the codec's BAD_ESCAPE_INDEX where they cannot belong to a valid index (FORMAT.md "Escape
 * index": from 0 to escape_count, non-decreasing; a segment's chunks hold at most its values):
 * the checks a whole decode makes across segments, each segment's own payload checking the rest.
 */
async function readSegmentEscapeIndex(read: Read, meta: PayloadMeta, k: number, values: number): Promise<Uint32Array | SplitZipError> {
  const firstChunk = (k * SEGMENT_VALUES) / meta.chunkSize;
  const endChunk = firstChunk + Math.ceil(values / meta.chunkSize);
  const bytes = new Uint8Array(4 * (endChunk - firstChunk + 1));
  await read(bytes, meta.layout.escapeIndex.offsetBytes + 4 * firstChunk);
  const view = new DataView(bytes.buffer);
  const index = new Uint32Array(endChunk - firstChunk + 1);
  for (let c = 0; c < index.length; c++) index[c] = view.getUint32(4 * c, true);
  const first = index[0]!;
  const end = index[index.length - 1]!;
  const last = k === Math.ceil(meta.elementCount / SEGMENT_VALUES) - 1;
  if ((k === 0 && first !== 0) || (last && end !== meta.escapeCount) || end < first || end - first > values || end > meta.escapeCount) {
    return new SplitZipError('BAD_ESCAPE_INDEX', `escape index of segment ${k} runs from ${first} to ${end}, outside a valid index of ${meta.escapeCount} escapes`, {
      segment: k,
      first,
      end,
      escapeCount: meta.escapeCount,
    });
  }
  return index;
}

/** h_index, h_pos, h_exp: the XXH32 of each escape section's span, read a piece at a time. */
async function hashEscapeSpans(read: Read, meta: PayloadMeta): Promise<number[]> {
  const { layout } = meta;
  const starts = [layout.escapeIndex.offsetBytes, layout.escapePositions.offsetBytes, layout.escapeExponents.offsetBytes, layout.totalBytes];
  const piece = new Uint8Array(Math.min(VERIFY_READ_PIECE_BYTES, layout.totalBytes - starts[0]!));
  const out: number[] = [];
  for (let s = 0; s < 3; s++) {
    const hash = createXxh32Stream();
    for (let at = starts[s]!; at < starts[s + 1]!; at += piece.length) {
      const part = piece.subarray(0, Math.min(piece.length, starts[s + 1]! - at));
      await read(part, at);
      hash.update(part);
    }
    out.push(hash.digest());
  }
  return out;
}

/** The version-3 checksum: XXH32 of h_header ‖ every segment's digests ‖ h_index ‖ h_pos ‖ h_exp (u32 LE). */
function combineChecksum(header: Uint8Array, segments: Uint32Array, escapes: number[]): number {
  const zeroed = header.slice();
  zeroed.fill(0, 252, 256);
  const list = new DataView(new ArrayBuffer(4 * (4 + segments.length)));
  list.setUint32(0, xxh32(zeroed), true);
  for (let i = 0; i < segments.length; i++) list.setUint32(4 * (1 + i), segments[i]!, true);
  for (let s = 0; s < 3; s++) list.setUint32(4 * (1 + segments.length + s), escapes[s]!, true);
  return xxh32(new Uint8Array(list.buffer));
}

/** The blob's SHA-256 (hex), read front to back a piece at a time. */
async function hashBlobSha256(read: Read, totalBytes: number): Promise<string> {
  const hash = createHash('sha256');
  const piece = new Uint8Array(Math.min(VERIFY_READ_PIECE_BYTES, totalBytes));
  for (let at = 0; at < totalBytes; at += piece.length) {
    const part = piece.subarray(0, Math.min(piece.length, totalBytes - at));
    await read(part, at);
    hash.update(part);
  }
  return hash.digest('hex');
}
