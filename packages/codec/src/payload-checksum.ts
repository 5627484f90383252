// The payload checksum (FORMAT.md, "Checksum"): XXH32 of the section digests, so a decoder or
// encoder can advance the big sections' digests side by side in one pass (independent chains).
// Version 1 hashes the sm section as one stream; version 2 as its even and odd 16-byte stripes
// (two chains of one round per 32 values instead of one chain of two, which bounded v1's speed);
// version 3 per segment of 2^20 values, codes as 2 and sm as 4 stripe streams (every chain one
// round per two groups, and segments hashed by different threads).
import { argumentTypeError } from './argument-type-error.js';
import type { PayloadLayout } from './compute-payload-layout.js';
import { HEADER_BYTES, HEADER_OFFSET, SEGMENT_DIGESTS, SEGMENT_VALUES } from './constants.js';
import { SplitZipError } from './errors.js';
import { Xxh32State } from './xxh32.js';

/** Digests of the codes and sm spans, when a kernel computed them in its own pass. */
export interface BulkDigests {
  codes: number;
  /** v1: the sm span's digest; v2: its even stripes' digest. */
  sm: number;
  /** v2 only: the sm span's odd stripes' digest. */
  smOdd?: number;
  /** v3 only: the segments' digests, SEGMENT_DIGESTS per segment (then `codes` and `sm` are unused). */
  segments?: Uint32Array;
}

/** Number of version-3 checksum segments of a payload with this layout (0 for an empty tensor). */
export function countSegments(layout: PayloadLayout): number {
  return Math.ceil(layout.sm.byteLength / SEGMENT_VALUES);
}

/** Segment k's codes and sm spans [from, to) (FORMAT.md "Version 3: segments"); the last runs to its section span's end. */
export function computeSegmentSpans(layout: PayloadLayout, k: number): { codes: number; codesEnd: number; sm: number; smEnd: number } {
  if (layout === null || typeof layout !== 'object' || typeof layout.codes !== 'object' || typeof layout.sm !== 'object' || typeof layout.escapeIndex !== 'object' || layout.codes === null || layout.sm === null || layout.escapeIndex === null) {
    throw argumentTypeError('layout', 'a PayloadLayout (computePayloadLayout)', layout);
  }
  if (!Number.isInteger(k) || k < 0) {
    throw new SplitZipError('INVALID_ARGUMENT', 'segment must be a non-negative integer', { argument: 'k', k });
  }
  // Past the last segment the spans would run beyond the sections (and totalBytes).
  const count = countSegments(layout);
  if (!(k < count)) {
    const range = count > 0 ? `an integer in 0..${count - 1} (the layout's segments)` : 'absent: a layout of 0 values has no segments';
    throw new SplitZipError('INVALID_ARGUMENT', `segment ${k} is out of range: it must be ${range}`, { argument: 'k', k, segmentCount: count });
  }
  const last = k === count - 1;
  const codes = layout.codes.offsetBytes + k * (SEGMENT_VALUES / 2);
  const sm = layout.sm.offsetBytes + k * SEGMENT_VALUES;
  return {
    codes,
    codesEnd: last ? layout.sm.offsetBytes : codes + SEGMENT_VALUES / 2,
    sm,
    smEnd: last ? layout.escapeIndex.offsetBytes : sm + SEGMENT_VALUES,
  };
}

/**
 * The digests of segments [first, end) into out[at ..): for each, its codes span's 2 and its sm
 * span's 4 stripe streams (plain JS; the kernels fuse the same streams into their passes).
 */
export function digestSegments(payload: Uint8Array, layout: PayloadLayout, first: number, end: number, out: Uint32Array, at = 0): void {
  for (let k = first; k < end; k++) {
    const span = computeSegmentSpans(layout, k);
    const o = at + SEGMENT_DIGESTS * (k - first);
    for (let j = 0; j < 2; j++) out[o + j] = digestStripes(payload, span.codes, span.codesEnd, j, 2);
    for (let j = 0; j < 4; j++) out[o + 2 + j] = digestStripes(payload, span.sm, span.smEnd, j, 4);
  }
}

/** The version-3 checksum from all segments' digests (SEGMENT_DIGESTS each, in segment order). */
export function combineSegmentChecksum(payload: Uint8Array, layout: PayloadLayout, segments: Uint32Array): number {
  return combineV3Checksum(computeOuterDigestList(payload, layout, new Uint32Array(4)), segments);
}

/** h_header, h_index, h_pos, h_exp of a version-3 payload (the digests not per segment), into out[0 .. 4). */
export function computeOuterDigestList(payload: Uint8Array, layout: PayloadLayout, out: Uint32Array): Uint32Array {
  const spans = checksumSpans(layout);
  out[0] = digestHeader(payload);
  for (let s = 3; s < 6; s++) out[s - 2] = digestSpan(payload, spans[s]![0], spans[s]![1]);
  return out;
}

/** The version-3 checksum: XXH32 of h_header ‖ every segment's digests ‖ h_index ‖ h_pos ‖ h_exp. */
export function combineV3Checksum(outer: Uint32Array, segments: Uint32Array): number {
  const list = new Uint32Array(4 + segments.length);
  list[0] = outer[0]!;
  list.set(segments, 1);
  list.set(outer.subarray(1, 4), 1 + segments.length);
  return digestSpan(u32ListBytes(list), 0, 4 * list.length);
}

/** The u32 list as little-endian bytes. */
function u32ListBytes(list: ArrayLike<number>): Uint8Array {
  const bytes = new Uint8Array(4 * list.length);
  for (let k = 0; k < list.length; k++) {
    const d = list[k]!;
    bytes[4 * k] = d & 0xff;
    bytes[4 * k + 1] = (d >>> 8) & 0xff;
    bytes[4 * k + 2] = (d >>> 16) & 0xff;
    bytes[4 * k + 3] = d >>> 24;
  }
  return bytes;
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

/** XXH32 (seed 0) of stripe stream `j` of `ways` over [from, to): the 16-byte stripes j, j + ways, … of the span. */
export function digestStripes(bytes: Uint8Array, from: number, to: number, j: number, ways = 2): number {
  const state = new Xxh32State(0);
  state.updateStripes(bytes, from + 16 * j, to, 16 * ways);
  return state.digest();
}

/** XXH32 of the 256-byte header with its checksum field read as zero. */
export function digestHeader(payload: Uint8Array): number {
  // A copy: on a Node Buffer `slice` is a view, and the fill below zeroed the caller's checksum field.
  const header = new Uint8Array(payload.subarray(0, HEADER_BYTES));
  header.fill(0, HEADER_OFFSET.checksum, HEADER_OFFSET.checksum + 4);
  return digestSpan(header, 0, HEADER_BYTES);
}

/**
 * The payload checksum of a payload of format `version` (1, 2 or 3): XXH32 (seed 0) of the digests
 * as u32 little-endian. `bulk` supplies the codes and sm digests when a kernel computed them
 * already (for this version); the rest are small and hashed here.
 */
export function computePayloadChecksum(payload: Uint8Array, layout: PayloadLayout, version: number, bulk?: BulkDigests | null): number {
  if (version >= 3) {
    let segments = bulk?.segments;
    if (segments === undefined) {
      segments = new Uint32Array(SEGMENT_DIGESTS * countSegments(layout));
      digestSegments(payload, layout, 0, countSegments(layout), segments);
    }
    return combineSegmentChecksum(payload, layout, segments);
  }
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
  return digestSpan(u32ListBytes(list), 0, 4 * list.length);
}
