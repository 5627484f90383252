import { decodeChunks, verifyPayloadChecksum, type PayloadMeta } from '@splitzip/codec';

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

export function createControl(taskCount: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4 * (CONTROL_TASK_DONE + taskCount)));
}

/** Chunk range [first, end) of task k of taskCount. */
export function taskChunks(k: number, taskCount: number, chunkCount: number): [number, number] {
  return [Math.floor((k * chunkCount) / taskCount), Math.floor(((k + 1) * chunkCount) / taskCount)];
}

/** Value range [start, stop) of task k. */
export function taskValues(k: number, taskCount: number, meta: PayloadMeta): [number, number] {
  const [first, end] = taskChunks(k, taskCount, meta.chunkCount);
  return [first * meta.chunkSize, Math.min(meta.elementCount, end * meta.chunkSize)];
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

/** The checksum check of a claimed job: counts as one finished item, or fails the job and rethrows. */
export function runVerify(payload: Uint8Array, meta: PayloadMeta, control: Int32Array, taskCount: number): void {
  try {
    verifyPayloadChecksum(payload, meta);
  } catch (error) {
    Atomics.store(control, CONTROL_VERIFY, VERIFY_JUDGED);
    markFailed(control, taskCount);
    throw error;
  }
  Atomics.store(control, CONTROL_VERIFY, VERIFY_JUDGED);
  Atomics.add(control, CONTROL_DONE, 1);
  Atomics.notify(control, CONTROL_DONE);
}

/**
 * Claims tasks (Atomics.add on the claimed slot) until none are left and decodes each into `out`
 * (indexed from value 0), flagging each finished task and counting it in the done slot;
 * `afterTask` runs after each of this thread's tasks. With `ready` (a payload still being copied
 * in, range by range) a task waits for ready[k] first. On an error it fails the job (so the
 * other threads stop early) and rethrows.
 */
export function decodeClaimedTasks(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array,
  control: Int32Array,
  taskCount: number,
  afterTask?: () => void,
  ready?: Int32Array | null,
): void {
  try {
    for (;;) {
      const k = Atomics.add(control, CONTROL_CLAIMED, 1);
      if (k >= taskCount) return;
      if (ready && !waitReady(ready, k, control)) return;
      const [first, end] = taskChunks(k, taskCount, meta.chunkCount);
      if (end > first) {
        const [start, stop] = taskValues(k, taskCount, meta);
        decodeChunks(payload, meta, first, end - first, out.subarray(start, stop));
      }
      Atomics.store(control, CONTROL_TASK_DONE + k, 1);
      Atomics.add(control, CONTROL_DONE, 1);
      Atomics.notify(control, CONTROL_DONE);
      afterTask?.();
    }
  } catch (error) {
    markFailed(control, taskCount);
    throw error;
  }
}
