import { checkSegmentedPayload } from './check-segment-arguments.js';
import type { PayloadMeta } from './read-payload-meta.js';

/** The number of checksum segments of a version-3 payload: ceil(n / SEGMENT_VALUES), 0 for an empty tensor. */
export function countPayloadSegments(payload: Uint8Array, meta: PayloadMeta): number {
  return checkSegmentedPayload(payload, meta);
}
