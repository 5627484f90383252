// The payload checksum (FORMAT.md, "Checksum"): XXH32 of six section digests, so a decoder or
// encoder can advance the codes and sm digests side by side in one pass (two independent chains).
import type { PayloadLayout } from './compute-payload-layout.js';
import { HEADER_BYTES, HEADER_OFFSET } from './constants.js';
import { Xxh32State } from './xxh32.js';

/** Digests of the codes and sm spans, when a kernel computed them in its own pass. */
export interface BulkDigests {
  codes: number;
  sm: number;
}

/**
 * The byte span [from, to) of each digest, in checksum order: header, codes, sm, escape index,
 * escape positions, escape exponents. Each section's span runs to the next section's offset (the
 * last to total_bytes), so it includes the section's zero padding and is a multiple of 256 bytes.
 */
export function checksumSpans(layout: PayloadLayout): [number, number][] {
  const starts = [
    0,
    layout.codes.offsetBytes,
    layout.sm.offsetBytes,
    layout.escapeIndex.offsetBytes,
    layout.escapePositions.offsetBytes,
    layout.escapeExponents.offsetBytes,
    layout.totalBytes,
  ];
  const spans: [number, number][] = [];
  for (let s = 0; s < 6; s++) spans.push([starts[s]!, starts[s + 1]!]);
  return spans;
}

/** XXH32 (seed 0) of bytes[from, to). */
export function digestSpan(bytes: Uint8Array, from: number, to: number): number {
  const state = new Xxh32State(0);
  state.update(bytes, from, to);
  return state.digest();
}

/** XXH32 of the 256-byte header with its checksum field read as zero. */
export function digestHeader(payload: Uint8Array): number {
  const header = payload.slice(0, HEADER_BYTES);
  header.fill(0, HEADER_OFFSET.checksum, HEADER_OFFSET.checksum + 4);
  return digestSpan(header, 0, HEADER_BYTES);
}

/**
 * The payload checksum: XXH32 (seed 0) of the six digests as u32 little-endian. `bulk` supplies the
 * codes and sm digests when a kernel computed them already; the rest are small and hashed here.
 */
export function computePayloadChecksum(payload: Uint8Array, layout: PayloadLayout, bulk?: BulkDigests | null): number {
  const spans = checksumSpans(layout);
  const digests = new Uint8Array(24);
  for (let s = 0; s < 6; s++) {
    const [from, to] = spans[s]!;
    let d: number;
    if (s === 0) d = digestHeader(payload);
    else if (s === 1 && bulk) d = bulk.codes;
    else if (s === 2 && bulk) d = bulk.sm;
    else d = digestSpan(payload, from, to);
    digests[4 * s] = d & 0xff;
    digests[4 * s + 1] = (d >>> 8) & 0xff;
    digests[4 * s + 2] = (d >>> 16) & 0xff;
    digests[4 * s + 3] = d >>> 24;
  }
  return digestSpan(digests, 0, 24);
}
