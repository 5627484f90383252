// The payload checksum (FORMAT.md, "Checksum"): XXH32 of the section digests, so a decoder or
// encoder can advance the big sections' digests side by side in one pass (independent chains).
// Version 1 hashes the sm section as one stream; version 2 as its even and odd 16-byte stripes
// (two chains of one round per 32 values instead of one chain of two, which bounded v1's speed).
import type { PayloadLayout } from './compute-payload-layout.js';
import { HEADER_BYTES, HEADER_OFFSET } from './constants.js';
import { Xxh32State } from './xxh32.js';

/** Digests of the codes and sm spans, when a kernel computed them in its own pass. */
export interface BulkDigests {
  codes: number;
  /** v1: the sm span's digest; v2: its even stripes' digest. */
  sm: number;
  /** v2 only: the sm span's odd stripes' digest. */
  smOdd?: number;
}

/**
 * The byte span [from, to) of each section, in checksum order: header, codes, sm, escape index,
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

/** XXH32 (seed 0) of the 16-byte stripes of [from, to) with this parity (0: stripes 0, 2, …; 1: 1, 3, …). */
export function digestStripes(bytes: Uint8Array, from: number, to: number, parity: 0 | 1): number {
  const state = new Xxh32State(0);
  state.updateStripes(bytes, from + 16 * parity, to, 32);
  return state.digest();
}

/** XXH32 of the 256-byte header with its checksum field read as zero. */
export function digestHeader(payload: Uint8Array): number {
  const header = payload.slice(0, HEADER_BYTES);
  header.fill(0, HEADER_OFFSET.checksum, HEADER_OFFSET.checksum + 4);
  return digestSpan(header, 0, HEADER_BYTES);
}

/**
 * The payload checksum of a payload of format `version` (1 or 2): XXH32 (seed 0) of the digests
 * as u32 little-endian. `bulk` supplies the codes and sm digests when a kernel computed them
 * already (for this version); the rest are small and hashed here.
 */
export function computePayloadChecksum(payload: Uint8Array, layout: PayloadLayout, version: number, bulk?: BulkDigests | null): number {
  const spans = checksumSpans(layout);
  const list: number[] = [];
  for (let s = 0; s < 6; s++) {
    const [from, to] = spans[s]!;
    if (s === 0) list.push(digestHeader(payload));
    else if (s === 1) list.push(bulk ? bulk.codes : digestSpan(payload, from, to));
    else if (s === 2 && version >= 2) {
      list.push(bulk ? bulk.sm : digestStripes(payload, from, to, 0));
      list.push(bulk?.smOdd !== undefined ? bulk.smOdd : digestStripes(payload, from, to, 1));
    } else if (s === 2) list.push(bulk ? bulk.sm : digestSpan(payload, from, to));
    else list.push(digestSpan(payload, from, to));
  }
  const digests = new Uint8Array(4 * list.length);
  list.forEach((d, k) => {
    digests[4 * k] = d & 0xff;
    digests[4 * k + 1] = (d >>> 8) & 0xff;
    digests[4 * k + 2] = (d >>> 16) & 0xff;
    digests[4 * k + 3] = d >>> 24;
  });
  return digestSpan(digests, 0, digests.length);
}
