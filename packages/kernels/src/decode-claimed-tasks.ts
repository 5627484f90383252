import { decodeChunks, verifyPayloadChecksum, type PayloadMeta } from '@splitzip/codec';

/** Slots of the Int32Array shared by every thread of one decode. */
export const CONTROL_CLAIMED = 0;
/** Finished work items: every task, plus the checksum when the job verifies. */
export const CONTROL_DONE = 1;
export const CONTROL_FAILED = 2;
/** 0 until a thread takes the checksum check (compareExchange to 1). */
export const CONTROL_VERIFY_CLAIMED = 3;
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

/** Marks the job failed: every task claimed (the other threads stop early), waiters woken. */
export function markFailed(control: Int32Array, taskCount: number): void {
  Atomics.store(control, CONTROL_CLAIMED, taskCount);
  Atomics.store(control, CONTROL_FAILED, 1);
  Atomics.notify(control, CONTROL_DONE);
}

/** Takes the checksum check if no thread has yet; true when this thread must run it. */
export function claimVerify(control: Int32Array): boolean {
  return Atomics.compareExchange(control, CONTROL_VERIFY_CLAIMED, 0, 1) === 0;
}

/** The checksum check of a claimed job: counts as one finished item, or fails the job and rethrows. */
export function runVerify(payload: Uint8Array, meta: PayloadMeta, control: Int32Array, taskCount: number): void {
  try {
    verifyPayloadChecksum(payload, meta);
  } catch (error) {
    markFailed(control, taskCount);
    throw error;
  }
  Atomics.add(control, CONTROL_DONE, 1);
  Atomics.notify(control, CONTROL_DONE);
}

/**
 * Claims tasks (Atomics.add on the claimed slot) until none are left and decodes each into `out`
 * (indexed from value 0), flagging each finished task and counting it in the done slot;
 * `afterTask` runs after each of this thread's tasks. On an error it fails the job (so the other
 * threads stop early) and rethrows.
 */
export function decodeClaimedTasks(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array,
  control: Int32Array,
  taskCount: number,
  afterTask?: () => void,
): void {
  try {
    for (;;) {
      const k = Atomics.add(control, CONTROL_CLAIMED, 1);
      if (k >= taskCount) return;
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
