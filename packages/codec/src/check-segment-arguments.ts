// Argument checks shared by the segment API (format v3's parallel verification).
import { argumentTypeError } from './argument-type-error.js';
import { SEGMENT_DIGESTS, SEGMENT_VALUES } from './constants.js';
import { isUint32Array } from './typed-array-kind.js';
import { checkMetaFitsPayload } from './decode-core.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import type { PayloadMeta } from './read-payload-meta.js';

/** Segments a version-3 payload's checksum has: ceil(n / SEGMENT_VALUES), 0 for an empty tensor. */
export function segmentCountOf(meta: PayloadMeta): number {
  return Math.ceil(meta.elementCount / SEGMENT_VALUES);
}

/**
 * Checks that meta fits the payload and that both say format version 3 (only v3 has segments);
 * returns the segment count.
 */
export function checkSegmentedPayload(payload: Uint8Array, meta: PayloadMeta): number {
  checkMetaFitsPayload(payload, meta);
  const stored = payload[4]! | (payload[5]! << 8);
  if (meta.version !== 3 || stored !== 3) {
    throw new SplitZipError('UNSUPPORTED_VERSION', `segment digests exist in format version 3 only (payload is version ${stored})`, {
      version: stored,
      metaVersion: meta.version,
    });
  }
  return segmentCountOf(meta);
}

/** Checks 0 <= firstSegment <= endSegment <= segmentCount (integers). */
export function checkSegmentRange(firstSegment: number, endSegment: number, segmentCount: number): void {
  if (
    !Number.isInteger(firstSegment) ||
    !Number.isInteger(endSegment) ||
    firstSegment < 0 ||
    firstSegment > endSegment ||
    endSegment > segmentCount
  ) {
    throw new SplitZipError('INVALID_ARGUMENT', `segments [${describeValue(firstSegment)}, ${describeValue(endSegment)}) are outside 0..${segmentCount}`, {
      firstSegment,
      endSegment,
      segmentCount,
    });
  }
}

/** Checks that `digests` is a Uint32Array with room for `segments` segments' digests (exactly, with `exact`). */
export function checkDigestsArray(digests: unknown, segments: number, exact: boolean): asserts digests is Uint32Array {
  if (!isUint32Array(digests)) {
    throw argumentTypeError('digests', 'a Uint32Array', digests);
  }
  const needed = SEGMENT_DIGESTS * segments;
  if (exact ? digests.length !== needed : digests.length < needed) {
    throw new SplitZipError(exact ? 'INVALID_ARGUMENT' : 'OUTPUT_TOO_SMALL', `digests holds ${digests.length} values, ${exact ? 'exactly ' : ''}${needed} needed`, {
      digestsLength: digests.length,
      needed,
    });
  }
}
