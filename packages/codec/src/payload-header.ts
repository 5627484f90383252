// Header encoding shared by the encoder, the payload writer and readPayloadMeta.
import { FORMAT_VERSION, HEADER_BYTES, HEADER_OFFSET, PAYLOAD_MAGIC } from './constants.js';
import type { Codebook } from './create-codebook.js';
import type { PayloadLayout } from './compute-payload-layout.js';

export function writeU32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value & 0xff;
  bytes[at + 1] = (value >>> 8) & 0xff;
  bytes[at + 2] = (value >>> 16) & 0xff;
  bytes[at + 3] = (value >>> 24) & 0xff;
}

export function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

/** Writes a u64 from a safe integer (< 2^53). */
export function writeU64(bytes: Uint8Array, at: number, value: number): void {
  writeU32(bytes, at, value % 0x100000000);
  writeU32(bytes, at + 4, Math.floor(value / 0x100000000));
}

/** Reads a u64; returns -1 when it is 2^53 or more, so callers reject it before any arithmetic. */
export function readU64(bytes: Uint8Array, at: number): number {
  const lo = readU32(bytes, at);
  const hi = readU32(bytes, at + 4);
  if (hi >= 0x200000) return -1;
  return hi * 0x100000000 + lo;
}

/** Writes the whole 256-byte header (checksum field 0) into bytes[0..256), zeroing the reserved bytes. */
export function writePayloadHeader(
  bytes: Uint8Array,
  elementCount: number,
  escapeCount: number,
  chunkSize: number,
  codebook: Codebook,
  layout: PayloadLayout,
): void {
  bytes.fill(0, 0, HEADER_BYTES);
  for (let k = 0; k < 4; k++) bytes[HEADER_OFFSET.magic + k] = PAYLOAD_MAGIC[k]!;
  bytes[HEADER_OFFSET.version] = FORMAT_VERSION & 0xff;
  bytes[HEADER_OFFSET.version + 1] = FORMAT_VERSION >>> 8;
  bytes[HEADER_OFFSET.headerBytes] = HEADER_BYTES & 0xff;
  bytes[HEADER_OFFSET.headerBytes + 1] = HEADER_BYTES >>> 8;
  writeU32(bytes, HEADER_OFFSET.chunkSize, chunkSize);
  writeU64(bytes, HEADER_OFFSET.elementCount, elementCount);
  writeU64(bytes, HEADER_OFFSET.escapeCount, escapeCount);
  writeU32(bytes, HEADER_OFFSET.chunkCount, Math.ceil(elementCount / chunkSize));
  bytes[HEADER_OFFSET.codebookSize] = codebook.exponents.length;
  for (let k = 0; k < codebook.exponents.length; k++) bytes[HEADER_OFFSET.codebook + k] = codebook.exponents[k]!;
  const sections = [layout.codes, layout.sm, layout.escapeIndex, layout.escapePositions, layout.escapeExponents];
  for (let s = 0; s < sections.length; s++) {
    writeU64(bytes, HEADER_OFFSET.sections + 16 * s, sections[s]!.offsetBytes);
    writeU64(bytes, HEADER_OFFSET.sections + 16 * s + 8, sections[s]!.byteLength);
  }
  writeU64(bytes, HEADER_OFFSET.totalBytes, layout.totalBytes);
}
