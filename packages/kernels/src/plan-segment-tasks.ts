import { SEGMENT_VALUES, type PayloadMeta } from '@splitzip/codec';

/**
 * One claimable task of a verified format-v3 decode whose payload and output are both in shared
 * memory (every thread reads and writes them in place):
 * - `fused`: decode and hash segments [first, end) in one pass (decodeSegments with digests);
 * - `outer`: the header's and the escape sections' digests (computeOuterDigests), the part of the
 *   checksum that is not per segment, which the caller used to hash after every other task was
 *   done (0.05-0.06 ms at 2^24 on the 2-core VM, all of it on the critical path).
 */
export interface SegmentTask {
  op: 'fused' | 'outer';
  first: number;
  end: number;
}

/**
 * Each task takes the segments left over this many per decoding thread (guided self-scheduling),
 * at least one: the early claims are few and large, the late ones single segments, so the threads
 * end at most about one segment apart at any size (equal ranges of 4 segments at 2^26 left them up
 * to 4 apart).
 */
const GUIDE_SHARES_PER_THREAD = 4;

/**
 * The tasks, in claim order, of a verified v3 decode shared by `decoders` threads (workers plus a
 * decoding caller): guided `fused` segment ranges, then the `outer` digests (the smallest task
 * last, where it fills the gap between the threads' ends). Every segment is decoded and hashed by
 * exactly one task; a pure function of the meta and `decoders`, so every thread derives the same
 * list. Splitting the last segment into a hash task and decode halves (each reads the segment's
 * bytes again) was measured and dropped: the threads ended closer, but later.
 */
export function planSegmentTasks(meta: PayloadMeta, decoders: number): SegmentTask[] {
  const segments = Math.ceil(meta.elementCount / SEGMENT_VALUES);
  const tasks: SegmentTask[] = [];
  for (let first = 0; first < segments; ) {
    const size = Math.max(1, Math.floor((segments - first) / (GUIDE_SHARES_PER_THREAD * decoders)));
    tasks.push({ op: 'fused', first, end: first + size });
    first += size;
  }
  tasks.push({ op: 'outer', first: 0, end: 0 });
  return tasks;
}

/** planSegmentTasks that keeps its last answer: every job of a loader's tensor of one shape asks again. */
export function createSegmentPlanner(): (meta: PayloadMeta, decoders: number) => SegmentTask[] {
  let lastMeta: PayloadMeta | null = null;
  let lastDecoders = 0;
  let lastPlan: SegmentTask[] = [];
  return (meta, decoders) => {
    if (meta !== lastMeta || decoders !== lastDecoders) {
      lastPlan = planSegmentTasks(meta, decoders);
      lastMeta = meta;
      lastDecoders = decoders;
    }
    return lastPlan;
  };
}
