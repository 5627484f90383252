import {
  computeOuterDigests,
  computeSegmentDigests,
  decodeChunks,
  decodeSegments,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  verifyPayloadChecksum,
  type PayloadMeta,
} from '@splitzip/codec';

/** Slots of the Int32Array shared by every thread of one decode. */
export const CONTROL_CLAIMED = 0;
/** Finished work items: every task, plus the checksum when the job verifies. */
export const CONTROL_DONE = 1;
export const CONTROL_FAILED = 2;
/** 0 until a thread takes the checksum check (compareExchange to 1), 2 once it has a verdict. */
export const CONTROL_VERIFY = 3;
const VERIFY_JUDGED = 2;
/** Then one slot per task: 1 once that task's values are written (the caller copies them out). */
export const CONTROL_TASK_DONE = 4;

/**
 * What each task of a job works on:
 * - `chunks`: decodes a range of chunks (a checksum, if any, is one thread's whole-payload pass);
 * - `segments`: decodes a range of format-v3 checksum segments and computes their digests in the
 *   same pass (the codec's decodeSegments with digests); the caller combines and checks them;
 * - `digests`: only computes a range of segments' digests (computeSegmentDigests), no output.
 */
export type TaskKind = 'chunks' | 'segments' | 'digests';

export function createControl(taskCount: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4 * (CONTROL_TASK_DONE + taskCount)));
}

/** How many units (chunks, or v3 segments) the tasks of a job split. */
export function taskUnits(meta: PayloadMeta, kind: TaskKind): number {
  return kind === 'chunks' ? meta.chunkCount : Math.ceil(meta.elementCount / SEGMENT_VALUES);
}

/** Unit range [first, end) of task k of taskCount. */
export function taskRange(k: number, taskCount: number, unitCount: number): [number, number] {
  return [Math.floor((k * unitCount) / taskCount), Math.floor(((k + 1) * unitCount) / taskCount)];
}

/** Value range [start, stop) of task k. */
export function taskValues(k: number, taskCount: number, meta: PayloadMeta, kind: TaskKind): [number, number] {
  const [first, end] = taskRange(k, taskCount, taskUnits(meta, kind));
  const unit = kind === 'chunks' ? meta.chunkSize : SEGMENT_VALUES;
  return [Math.min(meta.elementCount, first * unit), Math.min(meta.elementCount, end * unit)];
}

/** Waits until range k of a payload being copied in is in place; false if the job failed meanwhile. */
export function waitReady(ready: Int32Array, k: number, control: Int32Array): boolean {
  while (Atomics.load(ready, k) === 0) {
    if (Atomics.load(control, CONTROL_FAILED) !== 0) return false;
    Atomics.wait(ready, k, 0, 20);
  }
  return true;
}

/** Marks the job failed: every task claimed (the other threads stop early), waiters woken. */
export function markFailed(control: Int32Array, taskCount: number): void {
  Atomics.store(control, CONTROL_CLAIMED, taskCount);
  Atomics.store(control, CONTROL_FAILED, 1);
  Atomics.notify(control, CONTROL_DONE);
}

/** True once some thread finished the checksum check (passed or failed). */
export function isVerifyJudged(control: Int32Array): boolean {
  return Atomics.load(control, CONTROL_VERIFY) === VERIFY_JUDGED;
}

/** Takes the checksum check if no thread has yet; true when this thread must run it. */
export function claimVerify(control: Int32Array): boolean {
  return Atomics.compareExchange(control, CONTROL_VERIFY, 0, 1) === 0;
}

/**
 * Counts one finished work item in the done slot and wakes the waiters when it completes the job
 * (`doneTarget` items), or after every item when `doneTarget` is undefined (a caller that copies
 * each range out as it lands). A wake-up nobody needs is not free: each one that finds the caller
 * asleep wakes its core (on a VM, an interrupt to the host) only for it to sleep again.
 */
export function countDone(control: Int32Array, doneTarget: number | undefined): void {
  const finished = Atomics.add(control, CONTROL_DONE, 1) + 1;
  if (doneTarget === undefined || finished >= doneTarget) Atomics.notify(control, CONTROL_DONE);
}

/** The checksum check of a claimed job: counts as one finished item, or fails the job and rethrows. */
export function runVerify(payload: Uint8Array, meta: PayloadMeta, control: Int32Array, taskCount: number, doneTarget?: number): void {
  try {
    verifyPayloadChecksum(payload, meta);
  } catch (error) {
    Atomics.store(control, CONTROL_VERIFY, VERIFY_JUDGED);
    markFailed(control, taskCount);
    throw error;
  }
  Atomics.store(control, CONTROL_VERIFY, VERIFY_JUDGED);
  countDone(control, doneTarget);
}

/** What the tasks of one job do, and where `segments`/`digests` tasks put the digests (6 per segment, all segments). */
export interface TaskWork {
  kind: TaskKind;
  digests: Uint32Array | null;
  /** `digests`: a task waits until gate[0] (segments the caller has read) reaches its last segment. */
  gate?: Int32Array | null;
  /** Finished items that complete the job: waiters are woken only then (see countDone); undefined: after every task. */
  doneTarget?: number;
  /**
   * `segments`: the last task (taskCount - 1) computes the outer digests (header and escape
   * sections, computeOuterDigests) into `digests` after the segments' ones; the segments are
   * split into taskCount - 1 ranges. It is the smallest task, so it is claimed last. Without it
   * the caller hashes those sections after every other task is done.
   */
  outerTask?: boolean;
}

/** Waits until gate[0] >= `segments`; false if the job failed meanwhile. */
function waitGate(gate: Int32Array, segments: number, control: Int32Array): boolean {
  for (let seen = Atomics.load(gate, 0); seen < segments; seen = Atomics.load(gate, 0)) {
    if (Atomics.load(control, CONTROL_FAILED) !== 0) return false;
    Atomics.wait(gate, 0, seen, 20);
  }
  return true;
}

/**
 * Claims tasks (Atomics.add on the claimed slot) until none are left and runs each — decodes into
 * `out` (indexed from value 0) and/or writes its segments' digests — flagging each finished task
 * and counting it in the done slot; `afterTask` runs after each of this thread's tasks. With
 * `ready` (a payload still being copied in, range by range) a task waits for ready[k] first. On
 * an error it fails the job (so the other threads stop early) and rethrows.
 */
export function decodeClaimedTasks(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array | null,
  control: Int32Array,
  taskCount: number,
  work: TaskWork,
  afterTask?: () => void,
  ready?: Int32Array | null,
): void {
  const units = taskUnits(meta, work.kind);
  const ranges = work.outerTask ? taskCount - 1 : taskCount;
  try {
    for (;;) {
      const k = Atomics.add(control, CONTROL_CLAIMED, 1);
      if (k >= taskCount) return;
      if (ready && !waitReady(ready, k, control)) return;
      const [first, end] = k < ranges ? taskRange(k, ranges, units) : [units, units];
      if (work.gate && !waitGate(work.gate, end, control)) return;
      if (k === ranges) computeOuterDigests(payload, meta, work.digests!.subarray(SEGMENT_DIGESTS * units));
      else if (end > first) runTask(payload, meta, out, work, first, end, taskValues(k, ranges, meta, work.kind));
      Atomics.store(control, CONTROL_TASK_DONE + k, 1);
      countDone(control, work.doneTarget);
      afterTask?.();
    }
  } catch (error) {
    markFailed(control, taskCount);
    throw error;
  }
}

function runTask(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array | null,
  work: TaskWork,
  first: number,
  end: number,
  [start, stop]: [number, number],
): void {
  if (work.kind === 'chunks') {
    decodeChunks(payload, meta, first, end - first, out!.subarray(start, stop));
    return;
  }
  const digests = work.digests!.subarray(SEGMENT_DIGESTS * first, SEGMENT_DIGESTS * end);
  if (work.kind === 'segments') decodeSegments(payload, meta, first, end, out!.subarray(start, stop), { digests });
  else digests.set(computeSegmentDigests(payload, meta, first, end));
}
