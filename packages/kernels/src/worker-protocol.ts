import type { MessagePort } from 'node:worker_threads';
import type { SplitZipErrorCode } from '@splitzip/codec';

/** workerData of a decode worker: the doorbell it sleeps on, and its job and reply ports. */
export interface WorkerStart {
  /** Int32Array(1) over this: bumped and notified once per posted job. */
  doorbell: SharedArrayBuffer;
  jobs: MessagePort;
  replies: MessagePort;
}

/**
 * One decode, shared by the workers and the calling thread: the chunks are cut into `taskCount`
 * ranges and each thread claims the next range with Atomics.add until none are left, so fast
 * threads take more; the caller waits on the shared done counter, not on a message round trip.
 */
export interface DecodeJob {
  id: number;
  payload: SharedArrayBuffer;
  payloadOffset: number;
  payloadLength: number;
  out: SharedArrayBuffer;
  /** Byte offset of value 0 in `out`. */
  outOffset: number;
  /** Int32Array(CONTROL_SLOTS) over this: next task to claim, tasks done, failed flag. */
  control: SharedArrayBuffer;
  taskCount: number;
}

export type DecodeJobReply =
  | { id: number; ok: true }
  | {
      id: number;
      ok: false;
      error: { message: string; splitZipCode: SplitZipErrorCode | null; details: Record<string, unknown> };
    };
