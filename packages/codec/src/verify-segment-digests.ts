import { combineSegmentDigests } from './combine-segment-digests.js';
import { SplitZipError } from './errors.js';
import type { PayloadMeta } from './read-payload-meta.js';

/**
 * Throws CHECKSUM_MISMATCH unless the checksum combined from these segment digests (all segments,
 * in order; see combineSegmentDigests) equals the stored one. The parallel form of
 * verifyPayloadChecksum for version-3 payloads.
 */
export function verifySegmentDigests(payload: Uint8Array, meta: PayloadMeta, digests: Uint32Array): void {
  const actual = combineSegmentDigests(payload, meta, digests);
  if (actual !== meta.checksum) {
    throw new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its segment digests', {
      storedChecksum: meta.checksum,
      computedChecksum: actual,
    });
  }
}
