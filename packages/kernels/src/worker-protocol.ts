import type { MessagePort } from 'node:worker_threads';
import type { CodecArenaShare, SplitZipErrorCode } from '@splitzip/codec';
import type { TaskKind } from './decode-claimed-tasks.js';

/** workerData of a decode worker: the doorbell it sleeps on, and its job and reply ports. */
export interface WorkerStart {
  /** Int32Array(1) over this: bumped and notified once per posted message. */
  doorbell: SharedArrayBuffer;
  jobs: MessagePort;
  replies: MessagePort;
  /**
   * Int32Array(1) over this: the worker sets it to 1 once its modules are loaded, before it waits
   * for jobs. dispose() waits for it before terminating: a worker terminated while Node was still
   * loading its ESM modules left descriptors of those files open (a few per hundred decoders).
   */
  ready: SharedArrayBuffer;
}

/**
 * Where a buffer of a job lives: in a codec arena the worker attached (`arena`: the id of an
 * earlier AttachArena message; views of the worker's own attached buffer decode in place), or in
 * an ordinary SharedArrayBuffer posted with the job.
 */
export type BufferRef = { arena: number } | { shared: SharedArrayBuffer };

/** Sent before the first job that uses an arena: the worker attaches `share` (its own slot's). */
export interface AttachArena {
  attach: number;
  share: CodecArenaShare;
}

/** The arena `detach` will not be used again: the worker drops its reference. */
export interface DetachArena {
  detach: number;
}

/**
 * One decode (or checksum), shared by the workers and the calling thread: the chunks (or, for a
 * format-v3 payload, its checksum segments) are cut into `taskCount` ranges and each thread claims
 * the next range with Atomics.add until none are left, so fast threads take more. `chunks` with
 * `verify`: the first thread to claim it checks the payload checksum (one sequential pass) while
 * the others decode. `segments`: every task decodes and hashes its segments in one pass and
 * writes their digests into `digests`; `digests`: tasks only hash (no output); the caller combines
 * the digests and checks them. The caller waits on the shared done counter or the replies, not on
 * a message round trip per range. Layout of `control`: decode-claimed-tasks.ts.
 */
export interface DecodeJob {
  id: number;
  payload: BufferRef;
  payloadOffset: number;
  payloadLength: number;
  out: BufferRef;
  /** Byte offset of value 0 in `out`. */
  outOffset: number;
  control: SharedArrayBuffer;
  taskCount: number;
  kind: TaskKind;
  /** `chunks` only: one thread checks the whole payload's checksum. */
  verify: boolean;
  /** `segments`, `digests`: Uint32Array(6 * segment count) over this, filled task by task; else null. */
  digests: SharedArrayBuffer | null;
  /**
   * `digests` only, or null: Int32Array(1) over this counts the segments the caller has read; a
   * task waits until it covers the task's last segment (the hash follows the caller's upload).
   */
  gate?: SharedArrayBuffer | null;
  /**
   * Int32Array(taskCount) over this, or null: the payload is being copied into shared memory by
   * the caller, range by range; task k may start once slot k is 1 (header and escape sections are
   * in place before the job is posted).
   */
  ready: SharedArrayBuffer | null;
  /**
   * Finished items (tasks, plus the checksum with `verify`) that complete the job: the done slot
   * is notified only when they are reached. Absent: after every task (the caller copies each
   * range out as it lands, or waits on replies instead).
   */
  doneTarget?: number;
  /**
   * `segments` only: the last task computes the header's and escape sections' digests into
   * `digests` after the segments' (the other tasks split the segments); the caller then only
   * combines the lists. Set when payload and output are both in shared memory.
   */
  outerTask?: boolean;
}

export type WorkerMessage = DecodeJob | AttachArena | DetachArena | { stop: true };

export type DecodeJobReply =
  | { id: number; ok: true }
  | {
      id: number;
      ok: false;
      error: { message: string; splitZipCode: SplitZipErrorCode | null; details: Record<string, unknown> };
    };
