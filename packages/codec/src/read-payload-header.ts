import { argumentTypeError } from './argument-type-error.js';
import {
  READABLE_FORMAT_VERSIONS,
  HEADER_BYTES,
  HEADER_OFFSET,
  MAX_CODEBOOK_SIZE,
  MAX_ELEMENT_COUNT,
  PAYLOAD_MAGIC,
} from './constants.js';
import { isValidChunkSize, layoutFor, type PayloadLayout } from './compute-payload-layout.js';
import { createCodebook, type Codebook } from './create-codebook.js';
import { SplitZipError } from './errors.js';
import { checkReadableView, isUint8Array } from './typed-array-kind.js';
import { readU32, readU64 } from './payload-header.js';

/** What a payload's 256-byte header says, validated: all a reader that fetches the payload by ranges needs to plan its reads. */
export interface PayloadHeader {
  version: number;
  elementCount: number;
  chunkSize: number;
  chunkCount: number;
  escapeCount: number;
  codebook: Codebook;
  /** Where each section is, as computePayloadLayout gives it (the header's offsets equal it: checked). */
  layout: PayloadLayout;
  /** The whole payload's length in bytes (= layout.totalBytes). */
  totalBytes: number;
  /** Decoded length in bytes (2 per value). */
  rawBytes: number;
  /** The stored XXH32 of the whole payload (not verified: the header alone cannot be). */
  checksum: number;
}

const SECTION_NAMES = ['codes', 'sm', 'escapeIndex', 'escapePositions', 'escapeExponents'] as const;

/**
 * Reads and validates a payload's header from its first HEADER_BYTES bytes (FORMAT.md reader rules
 * 1-5, in that order, with readPayloadMeta's codes; bytes past the header are ignored, so a whole
 * payload works too). Rule 6 (the payload is total_bytes long) is readPayloadMeta's: a range reader
 * fetches the header first and learns total_bytes from it.
 */
export function readPayloadHeader(payload: Uint8Array): PayloadHeader {
  if (!isUint8Array(payload)) {
    throw argumentTypeError('payload', 'a Uint8Array', payload);
  }
  checkReadableView(payload, 'payload');
  // Rule 1.
  if (payload.length < HEADER_BYTES) {
    throw new SplitZipError('TRUNCATED', `payload is ${payload.length} bytes, shorter than the ${HEADER_BYTES}-byte header`, {
      payloadBytes: payload.length,
    });
  }
  // Rule 2.
  for (let k = 0; k < 4; k++) {
    if (payload[HEADER_OFFSET.magic + k] !== PAYLOAD_MAGIC[k]) {
      throw new SplitZipError('BAD_MAGIC', 'payload does not start with "SZBF"', {
        magic: Array.from(payload.subarray(0, 4)),
      });
    }
  }
  const version = payload[HEADER_OFFSET.version]! | (payload[HEADER_OFFSET.version + 1]! << 8);
  if (!READABLE_FORMAT_VERSIONS.includes(version)) {
    throw new SplitZipError('UNSUPPORTED_VERSION', `payload format version ${version} is not supported (only ${READABLE_FORMAT_VERSIONS.join(', ')})`, {
      version,
    });
  }
  const headerBytes = payload[HEADER_OFFSET.headerBytes]! | (payload[HEADER_OFFSET.headerBytes + 1]! << 8);
  if (headerBytes !== HEADER_BYTES) {
    throw new SplitZipError('BAD_HEADER', `header_bytes is ${headerBytes}, expected ${HEADER_BYTES}`, { headerBytes });
  }
  const flags = readU32(payload, HEADER_OFFSET.flags);
  if (flags !== 0) throw new SplitZipError('BAD_HEADER', 'flags must be 0', { flags });
  for (const [from, to] of [
    [HEADER_OFFSET.reserved1, HEADER_OFFSET.codebook],
    [HEADER_OFFSET.reserved2, HEADER_OFFSET.checksum],
  ] as const) {
    for (let p = from; p < to; p++) {
      if (payload[p] !== 0) throw new SplitZipError('BAD_HEADER', 'reserved header byte is not 0', { offsetBytes: p });
    }
  }
  // Rule 3.
  const chunkSize = readU32(payload, HEADER_OFFSET.chunkSize);
  if (!isValidChunkSize(chunkSize)) {
    throw new SplitZipError('BAD_HEADER', 'chunk_size must be a power of two in 64..65536', { chunkSize });
  }
  const elementCount = readU64(payload, HEADER_OFFSET.elementCount);
  if (elementCount < 0 || elementCount > MAX_ELEMENT_COUNT) {
    throw new SplitZipError('BAD_HEADER', `element_count exceeds ${MAX_ELEMENT_COUNT}`, {
      elementCountLow: readU32(payload, HEADER_OFFSET.elementCount),
      elementCountHigh: readU32(payload, HEADER_OFFSET.elementCount + 4),
    });
  }
  const chunkCount = readU32(payload, HEADER_OFFSET.chunkCount);
  const expectedChunkCount = Math.ceil(elementCount / chunkSize);
  if (chunkCount !== expectedChunkCount) {
    throw new SplitZipError('BAD_HEADER', 'chunk_count disagrees with element_count and chunk_size', {
      chunkCount,
      expectedChunkCount,
    });
  }
  const escapeCount = readU64(payload, HEADER_OFFSET.escapeCount);
  if (escapeCount < 0 || escapeCount > elementCount) {
    throw new SplitZipError('BAD_HEADER', 'escape_count exceeds element_count', {
      escapeCountLow: readU32(payload, HEADER_OFFSET.escapeCount),
      escapeCountHigh: readU32(payload, HEADER_OFFSET.escapeCount + 4),
      elementCount,
    });
  }
  // Rule 4.
  const codebookSize = payload[HEADER_OFFSET.codebookSize]!;
  if (codebookSize < 1 || codebookSize > MAX_CODEBOOK_SIZE) {
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook_size must be 1..16', { codebookSize });
  }
  for (let k = codebookSize; k < MAX_CODEBOOK_SIZE; k++) {
    if (payload[HEADER_OFFSET.codebook + k] !== 0) {
      throw new SplitZipError('INVALID_CODEBOOK', 'unused codebook entries must be 0', { entry: k });
    }
  }
  const codebook = createCodebook(
    Array.from(payload.subarray(HEADER_OFFSET.codebook, HEADER_OFFSET.codebook + codebookSize)),
  );
  // Rule 5.
  const layout = layoutFor(elementCount, escapeCount, chunkSize);
  for (let s = 0; s < SECTION_NAMES.length; s++) {
    const name = SECTION_NAMES[s]!;
    const at = HEADER_OFFSET.sections + 16 * s;
    const offsetBytes = readU64(payload, at);
    const byteLength = readU64(payload, at + 8);
    const expected = layout[name];
    if (offsetBytes !== expected.offsetBytes || byteLength !== expected.byteLength) {
      throw new SplitZipError('BAD_SECTION', `section ${name} is not where the layout rule puts it`, {
        section: name,
        offsetBytes,
        byteLength,
        expectedOffsetBytes: expected.offsetBytes,
        expectedByteLength: expected.byteLength,
      });
    }
  }
  const totalBytes = readU64(payload, HEADER_OFFSET.totalBytes);
  if (totalBytes !== layout.totalBytes) {
    throw new SplitZipError('BAD_SECTION', 'total_bytes disagrees with the layout rule', {
      totalBytes,
      expectedTotalBytes: layout.totalBytes,
    });
  }
  return {
    version,
    elementCount,
    chunkSize,
    chunkCount,
    escapeCount,
    codebook,
    layout,
    totalBytes,
    rawBytes: 2 * elementCount,
    checksum: readU32(payload, HEADER_OFFSET.checksum),
  };
}
