import { computePayloadLayout } from './compute-payload-layout.js';
import { DEFAULT_CHUNK_SIZE, FORMAT_VERSION, HEADER_OFFSET } from './constants.js';
import { ensureCodebook, type Codebook } from './create-codebook.js';
import { SplitZipError } from './errors.js';
import { computePayloadChecksum } from './payload-checksum.js';
import { writePayloadHeader, writeU32 } from './payload-header.js';
import { kernelsFor } from './backend.js';

/**
 * A payload allocated for a known (n, escape count, codebook, chunk size) whose sections another
 * encoder (e.g. a GPU one) fills in place. The typed-array views are little-endian on every
 * platform this package supports (it refuses big-endian hosts).
 */
export interface PayloadWriter {
  /** The whole payload (header written already). */
  bytes: Uint8Array;
  codes: Uint8Array;
  sm: Uint8Array;
  escapeIndex: Uint32Array;
  escapePositions: Uint16Array;
  escapeExponents: Uint8Array;
  /** Rewrites the header, computes the checksum and returns `bytes`. */
  seal(): Uint8Array;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function createPayloadWriter(
  elementCount: number,
  escapeCount: number,
  codebook: Codebook,
  chunkSize: number = DEFAULT_CHUNK_SIZE,
): PayloadWriter {
  if (!LITTLE_ENDIAN) {
    throw new SplitZipError('INVALID_ARGUMENT', 'createPayloadWriter needs a little-endian host', {});
  }
  const layout = computePayloadLayout(elementCount, escapeCount, chunkSize);
  const book = ensureCodebook(codebook);
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(layout.totalBytes);
  } catch (error) {
    // Above the engine's typed-array limit (or out of memory): a typed error, not a RangeError.
    throw new SplitZipError('INVALID_ARGUMENT', `cannot allocate a payload of ${layout.totalBytes} bytes`, {
      argument: 'elementCount',
      elementCount,
      totalBytes: layout.totalBytes,
      cause: String(error),
    });
  }
  writePayloadHeader(bytes, elementCount, escapeCount, chunkSize, book, layout);
  const { buffer } = bytes;
  return {
    bytes,
    codes: bytes.subarray(layout.codes.offsetBytes, layout.codes.offsetBytes + layout.codes.byteLength),
    sm: bytes.subarray(layout.sm.offsetBytes, layout.sm.offsetBytes + layout.sm.byteLength),
    escapeIndex: new Uint32Array(buffer, layout.escapeIndex.offsetBytes, layout.escapeIndex.byteLength / 4),
    escapePositions: new Uint16Array(buffer, layout.escapePositions.offsetBytes, escapeCount),
    escapeExponents: bytes.subarray(
      layout.escapeExponents.offsetBytes,
      layout.escapeExponents.offsetBytes + layout.escapeExponents.byteLength,
    ),
    seal(): Uint8Array {
      writePayloadHeader(bytes, elementCount, escapeCount, chunkSize, book, layout);
      const sum = computePayloadChecksum(bytes, layout, FORMAT_VERSION, kernelsFor(bytes).bulkDigests?.(bytes, layout, FORMAT_VERSION));
      writeU32(bytes, HEADER_OFFSET.checksum, sum);
      return bytes;
    },
  };
}
