import { availableParallelism } from 'node:os';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { decode, readPayloadMeta, SplitZipError, verifyPayloadChecksum } from '@splitzip/codec';
import { checkOutput } from './check-output.js';
import { KernelsError } from './errors.js';
import { CONTROL_DONE, CONTROL_FAILED, CONTROL_SLOTS, decodeClaimedTasks } from './decode-claimed-tasks.js';
import type { DecodeJob, DecodeJobReply, WorkerStart } from './worker-protocol.js';
import type { DecodeOptions } from './types.js';

/** Below this many values one thread beats the hand-off to workers (measured: 2^20 was slower in parallel). */
export const DEFAULT_MIN_PARALLEL_ELEMENTS = 2 ** 22;
/** Cap on the pool: the decode is memory-bound well before this many cores. */
export const MAX_WORKER_THREADS = 32;
/** Claimable ranges per decoding thread: small enough to balance, large enough to amortize. */
const TASKS_PER_THREAD = 8;

export interface WorkerDecoderOptions {
  /**
   * Worker threads in the pool; the calling thread decodes too (after the checksum), so a 2-core
   * machine wants 1. Default: available cores - 1, at least 1, at most MAX_WORKER_THREADS.
   */
  threads?: number;
  /** Tensors smaller than this decode on the calling thread (default DEFAULT_MIN_PARALLEL_ELEMENTS). */
  minParallelElements?: number;
  /** The worker script (default: decode-worker.js next to this module in dist/). */
  workerUrl?: URL | string;
}

export interface WorkerDecoder {
  readonly threads: number;
  /**
   * Decodes across the pool, chunk ranges per worker; calls run one at a time. Fastest with the
   * payload and `out` in SharedArrayBuffers (no copies). A non-shared payload is copied into a
   * kept shared staging buffer; a non-shared `out` receives a copy at the end; without `out` the
   * result is a new SharedArrayBuffer-backed array.
   */
  decode(payload: Uint8Array, out?: Uint16Array, options?: DecodeOptions): Promise<Uint16Array>;
  /** Terminates the workers; idempotent. */
  dispose(): Promise<void>;
}

interface PoolWorker {
  worker: Worker;
  busy: number;
  doorbell: Int32Array;
  jobs: MessagePort;
  replies: MessagePort;
}

/** A persistent pool of decode workers (Node only: node:worker_threads). Workers start lazily. */
export function createWorkerDecoder(options: WorkerDecoderOptions = {}): WorkerDecoder {
  const threads = options.threads ?? Math.min(MAX_WORKER_THREADS, Math.max(1, availableParallelism() - 1));
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_WORKER_THREADS) {
    throw new KernelsError('INVALID_ARGUMENT', `threads must be an integer in 1..${MAX_WORKER_THREADS}`, { threads });
  }
  const minParallel = options.minParallelElements ?? DEFAULT_MIN_PARALLEL_ELEMENTS;
  const workerUrl = options.workerUrl ?? new URL('./decode-worker.js', import.meta.url);
  const pool: PoolWorker[] = [];
  const pending = new Map<number, { resolve: () => void; reject: (error: Error) => void; worker: PoolWorker }>();
  let nextId = 1;
  let disposed = false;

  const failPending = (worker: PoolWorker, error: Error): void => {
    for (const [id, entry] of pending) {
      if (entry.worker === worker) {
        pending.delete(id);
        entry.reject(error);
      }
    }
  };

  const spawn = (): PoolWorker => {
    const doorbell = new Int32Array(new SharedArrayBuffer(4));
    const jobChannel = new MessageChannel();
    const replyChannel = new MessageChannel();
    const start: WorkerStart = { doorbell: doorbell.buffer as SharedArrayBuffer, jobs: jobChannel.port2, replies: replyChannel.port2 };
    const worker = new Worker(workerUrl, { workerData: start, transferList: [jobChannel.port2, replyChannel.port2] });
    const entry: PoolWorker = { worker, busy: 0, doorbell, jobs: jobChannel.port1, replies: replyChannel.port1 };
    worker.unref();
    entry.replies.unref();
    entry.replies.on('message', (reply: DecodeJobReply) => {
      const task = pending.get(reply.id);
      if (!task) return;
      pending.delete(reply.id);
      if (--entry.busy === 0) {
        worker.unref();
        entry.replies.unref();
      }
      if (reply.ok) task.resolve();
      else task.reject(rebuildError(reply.error));
    });
    const onDeath = (error: Error): void => {
      const index = pool.indexOf(entry);
      if (index >= 0) pool.splice(index, 1);
      failPending(entry, new KernelsError('WORKER_FAILED', `decode worker died: ${error.message}`, {}));
    };
    worker.on('error', onDeath);
    worker.on('exit', (code: number) => onDeath(new Error(`exit code ${code}`)));
    return entry;
  };

  const postJob = (job: Omit<DecodeJob, 'id'>, entry: PoolWorker): Promise<void> => {
    const id = nextId++;
    return new Promise<void>((resolve, reject) => {
      pending.set(id, { resolve, reject, worker: entry });
      // Referenced while busy, so the process waits for the answer; idle workers never hold it open.
      if (entry.busy++ === 0) {
        entry.worker.ref();
        entry.replies.ref();
      }
      entry.jobs.postMessage({ ...job, id } satisfies DecodeJob);
      Atomics.add(entry.doorbell, 0, 1);
      Atomics.notify(entry.doorbell, 0);
    });
  };

  // Staging in shared memory, kept across calls: a fresh SharedArrayBuffer per call costs a page
  // fault per 4 KiB, which on large tensors cost more than the decode itself.
  let payloadStage: Uint8Array | null = null;
  let outStage: Uint16Array | null = null;
  // One decode at a time: calls share the staging buffers and the pool.
  let queue: Promise<unknown> = Promise.resolve();

  const decodeParallel = async (payload: Uint8Array, out: Uint16Array | undefined, verify: boolean): Promise<Uint16Array> => {
    const meta = readPayloadMeta(payload);
    const n = meta.elementCount;
    if (n < minParallel || meta.chunkCount < 2) {
      return decode(payload, out, verify ? undefined : { verify: false });
    }
    const target = out === undefined ? new Uint16Array(new SharedArrayBuffer(2 * n)) : checkOutput(out, n);
    let shared = payload;
    if (!(payload.buffer instanceof SharedArrayBuffer)) {
      if (!payloadStage || payloadStage.length < meta.compBytes) payloadStage = new Uint8Array(new SharedArrayBuffer(grow(meta.compBytes)));
      payloadStage.set(payload.subarray(0, meta.compBytes));
      shared = payloadStage;
    }
    let outShared = target;
    if (!(target.buffer instanceof SharedArrayBuffer)) {
      if (!outStage || outStage.length < n) outStage = new Uint16Array(new SharedArrayBuffer(2 * grow(n)));
      outShared = outStage;
    }
    while (pool.length < threads) pool.push(spawn());
    const taskCount = Math.min(meta.chunkCount, TASKS_PER_THREAD * (threads + 1));
    const control = new Int32Array(new SharedArrayBuffer(4 * CONTROL_SLOTS));
    const job = {
      payload: shared.buffer as SharedArrayBuffer,
      payloadOffset: shared.byteOffset,
      payloadLength: meta.compBytes,
      out: outShared.buffer as SharedArrayBuffer,
      outOffset: outShared.byteOffset,
      control: control.buffer as SharedArrayBuffer,
      taskCount,
    };
    const replies = pool.map((entry) => postJob(job, entry));
    // Awaited only when something failed; a late reply for a finished job must not go unhandled.
    for (const reply of replies) reply.catch(() => undefined);
    // This thread checks the checksum while the workers decode, then claims ranges too.
    let localError: unknown = null;
    try {
      if (verify) verifyPayloadChecksum(payload, meta);
      decodeClaimedTasks(shared.subarray(0, meta.compBytes), meta, outShared.subarray(0, n), control, taskCount);
    } catch (error) {
      Atomics.store(control, 0, taskCount);
      localError = error;
    }
    if (localError === null) {
      // Every task is claimed; wait (briefly, blocking) for the ones workers are still finishing.
      // Waiting on the shared counter avoids a message round trip per worker, which on a busy
      // machine cost more than a 2^20-value decode.
      for (;;) {
        const done = Atomics.load(control, CONTROL_DONE);
        if (done >= taskCount || Atomics.load(control, CONTROL_FAILED) !== 0) break;
        Atomics.wait(control, CONTROL_DONE, done, 50);
      }
    }
    if (localError !== null || Atomics.load(control, CONTROL_FAILED) !== 0) {
      const settled = await Promise.allSettled(replies);
      if (localError) throw localError;
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
    }
    if (outShared !== target) target.set(outShared.subarray(0, n));
    return target;
  };

  return {
    threads,

    decode(payload, out, decodeOptions) {
      if (disposed) return Promise.reject(new KernelsError('DISPOSED', 'this worker decoder was disposed', {}));
      const run = queue.then(() => decodeParallel(payload, out, decodeOptions?.verify !== false));
      queue = run.catch(() => undefined);
      return run;
    },

    async dispose() {
      if (disposed) return;
      disposed = true;
      await queue;
      const workers = pool.splice(0);
      for (const entry of workers) failPending(entry, new KernelsError('DISPOSED', 'worker decoder disposed', {}));
      for (const entry of workers) {
        entry.jobs.postMessage({ stop: true });
        Atomics.add(entry.doorbell, 0, 1);
        Atomics.notify(entry.doorbell, 0);
      }
      await Promise.all(workers.map((entry) => entry.worker.terminate()));
      for (const entry of workers) {
        entry.jobs.close();
        entry.replies.close();
      }
      payloadStage = null;
      outStage = null;
    },
  };
}

/** Staging sizes grow by a quarter beyond the need, so a run of similar tensors reallocates rarely. */
function grow(length: number): number {
  return Math.ceil(length * 1.25);
}

function rebuildError(error: Extract<DecodeJobReply, { ok: false }>['error']): Error {
  if (error.splitZipCode) {
    const prefix = `${error.splitZipCode}: `;
    const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
    return new SplitZipError(error.splitZipCode, message, error.details);
  }
  return new KernelsError('WORKER_FAILED', `decode worker failed: ${error.message}`, {});
}
