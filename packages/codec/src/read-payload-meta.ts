import type { PayloadLayout } from './compute-payload-layout.js';
import type { Codebook } from './create-codebook.js';
import { SplitZipError } from './errors.js';
import { readPayloadHeader } from './read-payload-header.js';

export interface PayloadMeta {
  version: number;
  elementCount: number;
  chunkSize: number;
  chunkCount: number;
  escapeCount: number;
  codebook: Codebook;
  layout: PayloadLayout;
  /** Payload length in bytes (= layout.totalBytes). */
  compBytes: number;
  /** Decoded length in bytes (2 per value). */
  rawBytes: number;
  /** The stored XXH32 (not verified here). */
  checksum: number;
}

/** Reads and validates the header (FORMAT.md reader rules 1-6, in that order); does not check the checksum. */
export function readPayloadMeta(payload: Uint8Array): PayloadMeta {
  // Rules 1-5: the header's own bytes (what a range reader checks alone with readPayloadHeader).
  const header = readPayloadHeader(payload);
  const { totalBytes } = header;
  // Rule 6.
  if (payload.length < totalBytes) {
    throw new SplitZipError('TRUNCATED', `payload is ${payload.length} bytes, header says ${totalBytes}`, {
      payloadBytes: payload.length,
      totalBytes,
    });
  }
  return {
    version: header.version,
    elementCount: header.elementCount,
    chunkSize: header.chunkSize,
    chunkCount: header.chunkCount,
    escapeCount: header.escapeCount,
    codebook: header.codebook,
    layout: header.layout,
    compBytes: totalBytes,
    rawBytes: header.rawBytes,
    checksum: header.checksum,
  };
}
