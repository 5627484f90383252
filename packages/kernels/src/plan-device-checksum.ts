import { SEGMENT_VALUES, type PayloadMeta } from '@splitzip/codec';
import type { DecodeSegmentPlan } from './plan-device-slices.js';
import { HASH_THREADS_PER_SEGMENT } from './wgsl-checksum-source.js';

/** Six stripe streams per format-v3 checksum segment (codes w = 2, sm w = 4). */
const STREAMS_PER_SEGMENT = 6;
const roundUp = (x: number, m: number): number => Math.ceil(x / m) * m;

/** Slices [from, to) of the device segment hashed by one dispatch, bound as input bytes [baseBytes, endBytes). */
export interface HashGroup {
  firstSegment: number;
  segments: number;
  baseBytes: number;
  endBytes: number;
}

export interface DeviceChecksumPlan {
  segmentCount: number;
  /** Per checksum segment: codes word, codes stripes per stream, sm word, sm stripes per stream (words relative to its group's base). */
  spans: Uint32Array;
  /** Per stream (6 per segment, FORMAT.md's order): its length in bytes, for finishing its digest. */
  streamBytes: Float64Array;
  groups: HashGroup[];
  /** Lane accumulators the hash pass writes: 24 per segment. */
  laneCount: number;
}

/**
 * Where each format-v3 checksum segment's codes and sm spans lie in the device's input buffer, for
 * a hash dispatch per group of slices (`groups`: [from, to) slice ranges of `segment`, in order,
 * covering it). Null when the device cannot hash this payload: format before v3, no values, more
 * than one device segment (outputs would reach the caller before the whole checksum is known), or
 * slices that are not whole checksum segments (slices under 2^20 values): the host hashes then.
 */
export function planDeviceChecksum(
  meta: PayloadMeta,
  plan: readonly DecodeSegmentPlan[],
  groups: ReadonlyArray<readonly [number, number]>,
): DeviceChecksumPlan | null {
  const n = meta.elementCount;
  if (meta.version < 3 || n === 0 || plan.length !== 1) return null;
  const segment = plan[0]!;
  const slices = segment.slices;
  if (slices.some((s, i) => s.firstElement % SEGMENT_VALUES !== 0 || (i < slices.length - 1 && s.count % SEGMENT_VALUES !== 0))) return null;
  const segmentCount = Math.ceil(n / SEGMENT_VALUES);
  const spans = new Uint32Array(4 * segmentCount);
  const streamBytes = new Float64Array(STREAMS_PER_SEGMENT * segmentCount);
  const hashGroups: HashGroup[] = [];
  const halfSegment = SEGMENT_VALUES / 2;
  for (const [from, to] of groups) {
    const first = slices[from]!;
    const last = slices[to - 1]!;
    const baseBytes = first.codes.dstOffset;
    let endBytes = baseBytes;
    const firstSegment = first.firstElement / SEGMENT_VALUES;
    for (let i = from; i < to; i++) {
      const s = slices[i]!;
      for (const w of [s.codes, s.sm, s.escapeIndex, s.positions, s.exponents]) if (w !== null) endBytes = Math.max(endBytes, w.dstOffset + w.bytes);
      for (let k = s.firstElement / SEGMENT_VALUES; k * SEGMENT_VALUES < s.firstElement + s.count; k++) {
        const lastSegment = k === segmentCount - 1;
        // FORMAT.md: a segment's spans are 2^19 codes and 2^20 sm bytes; the last runs to its section's padded end.
        const codesBytes = lastSegment ? roundUp(Math.ceil(n / 2) - k * halfSegment, 256) : halfSegment;
        const smBytes = lastSegment ? roundUp(n - k * SEGMENT_VALUES, 256) : SEGMENT_VALUES;
        const codesAt = s.codes.dstOffset + (k * SEGMENT_VALUES - s.firstElement) / 2;
        const smAt = s.sm.dstOffset + (k * SEGMENT_VALUES - s.firstElement);
        // The planner's windows cover whole spans; anything else is a planning bug, never a wrong hash.
        if (codesAt + codesBytes > s.codes.dstOffset + s.codes.bytes || smAt + smBytes > s.sm.dstOffset + s.sm.bytes) return null;
        spans.set([(codesAt - baseBytes) / 4, codesBytes / 32, (smAt - baseBytes) / 4, smBytes / 64], 4 * k);
        streamBytes.set([codesBytes / 2, codesBytes / 2, smBytes / 4, smBytes / 4, smBytes / 4, smBytes / 4], STREAMS_PER_SEGMENT * k);
      }
    }
    const endSegment = Math.ceil((last.firstElement + last.count) / SEGMENT_VALUES);
    hashGroups.push({ firstSegment, segments: endSegment - firstSegment, baseBytes, endBytes: roundUp(endBytes, 4) });
  }
  const covered = hashGroups.reduce((sum, g) => sum + g.segments, 0);
  if (covered !== segmentCount) return null;
  return { segmentCount, spans, streamBytes, groups: hashGroups, laneCount: HASH_THREADS_PER_SEGMENT * segmentCount };
}
