import { checkDigestsArray, checkSegmentedPayload } from './check-segment-arguments.js';
import { combineSegmentChecksum } from './payload-checksum.js';
import type { PayloadMeta } from './read-payload-meta.js';

/**
 * The checksum of a version-3 payload from all its segments' digests (6 per segment, in segment
 * order, e.g. the concatenated results of computeSegmentDigests or decodeSegments over a split of
 * [0, segment count)); the header and escape sections are hashed here. Compare with meta.checksum,
 * or use verifySegmentDigests.
 */
export function combineSegmentDigests(payload: Uint8Array, meta: PayloadMeta, digests: Uint32Array): number {
  const segmentCount = checkSegmentedPayload(payload, meta);
  checkDigestsArray(digests, segmentCount, true);
  return combineSegmentChecksum(payload, meta.layout, digests);
}
