import { SplitZipError } from './errors.js';
import { readPayloadHeader, type PayloadHeader } from './read-payload-header.js';

/** The header's fields (PayloadHeader) once the whole payload is there: its length is `compBytes`. */
export interface PayloadMeta extends Omit<PayloadHeader, 'totalBytes'> {
  /** Payload length in bytes (= layout.totalBytes). */
  compBytes: number;
}

/** Reads and validates the header (FORMAT.md reader rules 1-6, in that order); does not check the checksum. */
export function readPayloadMeta(payload: Uint8Array): PayloadMeta {
  // Rules 1-5: the header's own bytes (what a range reader checks alone with readPayloadHeader).
  const header = readPayloadHeader(payload);
  const { totalBytes, ...fields } = header;
  // Rule 6.
  if (payload.length < totalBytes) {
    throw new SplitZipError('TRUNCATED', `payload is ${payload.length} bytes, header says ${totalBytes}`, {
      payloadBytes: payload.length,
      totalBytes,
    });
  }
  return { ...fields, compBytes: totalBytes };
}
