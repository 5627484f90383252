// The version-3 checksum from digests that threads computed apart: the segment digests
// (computeSegmentDigests, decodeSegments) and the "outer" ones — the header's and the three escape
// sections' — so that no thread has to hash the escape sections after all the others are done.
import { checkDigestsArray, checkSegmentedPayload } from './check-segment-arguments.js';
import { isUint32Array } from './typed-array-kind.js';
import { SplitZipError } from './errors.js';
import { combineV3Checksum, computeOuterDigestList } from './payload-checksum.js';
import type { PayloadMeta } from './read-payload-meta.js';

/** Digests computeOuterDigests returns: h_header, h_index, h_pos, h_exp (FORMAT.md "Checksum"). */
export const OUTER_DIGESTS = 4;

/**
 * The header's digest (checksum field read as zero) and the escape index's, escape positions' and
 * escape exponents' (each span with its padding) of a version-3 payload, in that order, into
 * `out[0 .. 4)` (a new array without it). The part of the checksum that is not per segment;
 * combine with the segments' digests by combineOuterDigests.
 */
export function computeOuterDigests(payload: Uint8Array, meta: PayloadMeta, out?: Uint32Array): Uint32Array {
  checkSegmentedPayload(payload, meta);
  const target = out ?? new Uint32Array(OUTER_DIGESTS);
  checkOuterArray(target, false);
  computeOuterDigestList(payload, meta.layout, target);
  return target;
}

/**
 * The checksum of a version-3 payload from all its segments' digests (6 per segment, in order)
 * and its outer digests (computeOuterDigests): the same number as combineSegmentDigests, with
 * nothing of the payload hashed here.
 */
export function combineOuterDigests(payload: Uint8Array, meta: PayloadMeta, segmentDigests: Uint32Array, outerDigests: Uint32Array): number {
  const segmentCount = checkSegmentedPayload(payload, meta);
  checkDigestsArray(segmentDigests, segmentCount, true);
  checkOuterArray(outerDigests, true);
  return combineV3Checksum(outerDigests, segmentDigests);
}

/** Throws CHECKSUM_MISMATCH unless combineOuterDigests gives the stored checksum. */
export function verifyOuterDigests(payload: Uint8Array, meta: PayloadMeta, segmentDigests: Uint32Array, outerDigests: Uint32Array): void {
  const actual = combineOuterDigests(payload, meta, segmentDigests, outerDigests);
  if (actual !== meta.checksum) {
    throw new SplitZipError('CHECKSUM_MISMATCH', 'payload checksum does not match its segment and outer digests', {
      storedChecksum: meta.checksum,
      computedChecksum: actual,
    });
  }
}

function checkOuterArray(digests: unknown, exact: boolean): asserts digests is Uint32Array {
  if (!isUint32Array(digests) || (exact ? digests.length !== OUTER_DIGESTS : digests.length < OUTER_DIGESTS)) {
    throw new SplitZipError(exact ? 'INVALID_ARGUMENT' : 'OUTPUT_TOO_SMALL', `outer digests must be a Uint32Array of ${exact ? '' : 'at least '}${OUTER_DIGESTS} values`, {
      digestsLength: isUint32Array(digests) ? digests.length : null,
    });
  }
}
