import { kernelsFor } from './backend.js';
import { checkSegmentRange, checkSegmentedPayload } from './check-segment-arguments.js';
import { SEGMENT_DIGESTS } from './constants.js';
import { digestSegments } from './payload-checksum.js';
import type { PayloadMeta } from './read-payload-meta.js';

/**
 * The checksum digests of segments [firstSegment, endSegment) of a version-3 payload: SEGMENT_DIGESTS
 * (6) per segment, in order (FORMAT.md "Version 3: segments"). For verifying one payload on several
 * threads: each computes a range, one combines them (combineSegmentDigests, verifySegmentDigests).
 * Works in place on codec-arena views.
 */
export function computeSegmentDigests(payload: Uint8Array, meta: PayloadMeta, firstSegment: number, endSegment: number): Uint32Array {
  const segmentCount = checkSegmentedPayload(payload, meta);
  checkSegmentRange(firstSegment, endSegment, segmentCount);
  const out = new Uint32Array(SEGMENT_DIGESTS * (endSegment - firstSegment));
  const kernels = kernelsFor(payload);
  if (kernels.segmentDigests !== undefined) kernels.segmentDigests(payload, meta.layout, firstSegment, endSegment, out);
  else digestSegments(payload, meta.layout, firstSegment, endSegment, out);
  return out;
}
