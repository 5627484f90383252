import { describeValue } from './describe-value.js';
import {
  DEFAULT_CHUNK_SIZE,
  HEADER_BYTES,
  MAX_CHUNK_SIZE,
  MAX_ELEMENT_COUNT,
  MIN_CHUNK_SIZE,
  SECTION_ALIGN_BYTES,
} from './constants.js';
import { SplitZipError } from './errors.js';

export interface PayloadSection {
  offsetBytes: number;
  byteLength: number;
}

export interface PayloadLayout {
  codes: PayloadSection;
  sm: PayloadSection;
  escapeIndex: PayloadSection;
  escapePositions: PayloadSection;
  escapeExponents: PayloadSection;
  /** Payload length: the end of the last section rounded up to SECTION_ALIGN_BYTES. */
  totalBytes: number;
}

export function isValidChunkSize(chunkSize: number): boolean {
  return (
    Number.isInteger(chunkSize) &&
    chunkSize >= MIN_CHUNK_SIZE &&
    chunkSize <= MAX_CHUNK_SIZE &&
    (chunkSize & (chunkSize - 1)) === 0
  );
}

function roundUpToSection(bytes: number): number {
  return Math.ceil(bytes / SECTION_ALIGN_BYTES) * SECTION_ALIGN_BYTES;
}

/** Layout without argument checks; callers have validated (every value stays far below 2^53). */
export function layoutFor(elementCount: number, escapeCount: number, chunkSize: number): PayloadLayout {
  const chunkCount = Math.ceil(elementCount / chunkSize);
  const codes = { offsetBytes: HEADER_BYTES, byteLength: Math.ceil(elementCount / 2) };
  const sm = { offsetBytes: roundUpToSection(codes.offsetBytes + codes.byteLength), byteLength: elementCount };
  const escapeIndex = { offsetBytes: roundUpToSection(sm.offsetBytes + sm.byteLength), byteLength: 4 * (chunkCount + 1) };
  const escapePositions = {
    offsetBytes: roundUpToSection(escapeIndex.offsetBytes + escapeIndex.byteLength),
    byteLength: 2 * escapeCount,
  };
  const escapeExponents = {
    offsetBytes: roundUpToSection(escapePositions.offsetBytes + escapePositions.byteLength),
    byteLength: escapeCount,
  };
  const totalBytes = roundUpToSection(escapeExponents.offsetBytes + escapeExponents.byteLength);
  return { codes, sm, escapeIndex, escapePositions, escapeExponents, totalBytes };
}

/** The section offsets and the total size FORMAT.md prescribes for (n, escape count, chunk size). */
export function computePayloadLayout(
  elementCount: number,
  escapeCount: number,
  chunkSize: number = DEFAULT_CHUNK_SIZE,
): PayloadLayout {
  if (!Number.isInteger(elementCount) || elementCount < 0 || elementCount > MAX_ELEMENT_COUNT) {
    throw new SplitZipError('INVALID_ARGUMENT', `elementCount must be an integer in 0..${MAX_ELEMENT_COUNT}, got ${describeValue(elementCount)}`, {
      elementCount,
    });
  }
  if (!Number.isInteger(escapeCount) || escapeCount < 0 || escapeCount > elementCount) {
    throw new SplitZipError('INVALID_ARGUMENT', `escapeCount must be an integer in 0..elementCount, got ${describeValue(escapeCount)}`, {
      escapeCount,
      elementCount,
    });
  }
  if (!isValidChunkSize(chunkSize)) {
    throw new SplitZipError('INVALID_ARGUMENT', `chunkSize must be a power of two in ${MIN_CHUNK_SIZE}..${MAX_CHUNK_SIZE}, got ${describeValue(chunkSize)}`, {
      chunkSize,
    });
  }
  return layoutFor(elementCount, escapeCount, chunkSize);
}
