import { decodeChunks, type PayloadMeta } from '@splitzip/codec';

/** Slots of the Int32Array shared by every thread of one decode. */
export const CONTROL_CLAIMED = 0;
export const CONTROL_DONE = 1;
export const CONTROL_FAILED = 2;
export const CONTROL_SLOTS = 3;

/** Chunk range [first, end) of task k of taskCount. */
export function taskChunks(k: number, taskCount: number, chunkCount: number): [number, number] {
  return [Math.floor((k * chunkCount) / taskCount), Math.floor(((k + 1) * chunkCount) / taskCount)];
}

/**
 * Claims tasks (Atomics.add on the claimed slot) until none are left and decodes each into `out`
 * (indexed from value 0), counting finished tasks in the done slot. On an error it marks every
 * task claimed and sets the failed slot, so the other threads stop early, and rethrows.
 */
export function decodeClaimedTasks(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array,
  control: Int32Array,
  taskCount: number,
): void {
  try {
    for (;;) {
      const k = Atomics.add(control, CONTROL_CLAIMED, 1);
      if (k >= taskCount) return;
      const [first, end] = taskChunks(k, taskCount, meta.chunkCount);
      if (end > first) {
        const start = first * meta.chunkSize;
        const stop = Math.min(meta.elementCount, end * meta.chunkSize);
        decodeChunks(payload, meta, first, end - first, out.subarray(start, stop));
      }
      Atomics.add(control, CONTROL_DONE, 1);
      Atomics.notify(control, CONTROL_DONE);
    }
  } catch (error) {
    Atomics.store(control, CONTROL_CLAIMED, taskCount);
    Atomics.store(control, CONTROL_FAILED, 1);
    Atomics.notify(control, CONTROL_DONE);
    throw error;
  }
}
