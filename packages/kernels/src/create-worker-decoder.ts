import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { decode, readPayloadMeta, SplitZipError, verifyPayloadChecksum } from '@splitzip/codec';
import { checkOutput } from './check-output.js';
import { KernelsError } from './errors.js';
import type { DecodeTask, DecodeTaskReply } from './worker-protocol.js';
import type { DecodeOptions } from './types.js';

/** Below this many values one thread beats the hand-off to workers. */
export const DEFAULT_MIN_PARALLEL_ELEMENTS = 2 ** 18;
/** Cap on the pool: the decode is memory-bound well before this many cores. */
export const MAX_WORKER_THREADS = 32;

export interface WorkerDecoderOptions {
  /** Worker threads in the pool (default: available cores, at most MAX_WORKER_THREADS). */
  threads?: number;
  /** Tensors smaller than this decode on the calling thread (default DEFAULT_MIN_PARALLEL_ELEMENTS). */
  minParallelElements?: number;
  /** The worker script (default: decode-worker.js next to this module in dist/). */
  workerUrl?: URL | string;
}

export interface WorkerDecoder {
  readonly threads: number;
  /**
   * Decodes across the pool, chunk ranges per worker. Without `out` the result is backed by a
   * SharedArrayBuffer; with a non-shared `out` the values are copied into it at the end.
   */
  decode(payload: Uint8Array, out?: Uint16Array, options?: DecodeOptions): Promise<Uint16Array>;
  /** Terminates the workers; idempotent. */
  dispose(): Promise<void>;
}

interface PoolWorker {
  worker: Worker;
  busy: number;
}

/** A persistent pool of decode workers (Node only: node:worker_threads). Workers start lazily. */
export function createWorkerDecoder(options: WorkerDecoderOptions = {}): WorkerDecoder {
  const threads = options.threads ?? Math.min(MAX_WORKER_THREADS, Math.max(1, availableParallelism()));
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
    const entry: PoolWorker = { worker: new Worker(workerUrl), busy: 0 };
    entry.worker.unref();
    entry.worker.on('message', (reply: DecodeTaskReply) => {
      const task = pending.get(reply.id);
      if (!task) return;
      pending.delete(reply.id);
      if (--entry.busy === 0) entry.worker.unref();
      if (reply.ok) task.resolve();
      else task.reject(rebuildError(reply.error));
    });
    const onDeath = (error: Error): void => {
      const index = pool.indexOf(entry);
      if (index >= 0) pool.splice(index, 1);
      failPending(entry, new KernelsError('WORKER_FAILED', `decode worker died: ${error.message}`, {}));
    };
    entry.worker.on('error', onDeath);
    entry.worker.on('exit', (code: number) => onDeath(new Error(`exit code ${code}`)));
    return entry;
  };

  const runTask = (task: Omit<DecodeTask, 'id'>, slot: number): Promise<void> => {
    while (pool.length < threads) pool.push(spawn());
    const entry = pool[slot % pool.length]!;
    const id = nextId++;
    return new Promise<void>((resolve, reject) => {
      pending.set(id, { resolve, reject, worker: entry });
      // Referenced while busy, so the process waits for the answer; idle workers never hold it open.
      if (entry.busy++ === 0) entry.worker.ref();
      entry.worker.postMessage({ ...task, id } satisfies DecodeTask);
    });
  };

  return {
    threads,

    async decode(payload, out, decodeOptions) {
      if (disposed) throw new KernelsError('DISPOSED', 'this worker decoder was disposed', {});
      const meta = readPayloadMeta(payload);
      const verify = decodeOptions?.verify !== false;
      if (meta.elementCount < minParallel || meta.chunkCount < 2 || threads === 1) {
        return decode(payload, out, verify ? undefined : { verify: false });
      }
      const target =
        out === undefined ? new Uint16Array(new SharedArrayBuffer(2 * meta.elementCount)) : checkOutput(out, meta.elementCount);
      const shared =
        payload.buffer instanceof SharedArrayBuffer ? payload : copyToShared(payload.subarray(0, meta.compBytes));
      const outShared = target.buffer instanceof SharedArrayBuffer ? target : new Uint16Array(new SharedArrayBuffer(2 * meta.elementCount));
      const parts = Math.min(threads, meta.chunkCount);
      const tasks: Promise<void>[] = [];
      for (let k = 0; k < parts; k++) {
        const firstChunk = Math.floor((k * meta.chunkCount) / parts);
        const endChunk = Math.floor(((k + 1) * meta.chunkCount) / parts);
        tasks.push(
          runTask(
            {
              payload: shared.buffer as SharedArrayBuffer,
              payloadOffset: shared.byteOffset,
              payloadLength: meta.compBytes,
              out: outShared.buffer as SharedArrayBuffer,
              outOffset: outShared.byteOffset,
              firstChunk,
              chunkCount: endChunk - firstChunk,
            },
            k,
          ),
        );
      }
      // The checksum runs here while the workers decode; a mismatch still fails the call.
      let checksumError: unknown = null;
      if (verify) {
        try {
          verifyPayloadChecksum(payload, meta);
        } catch (error) {
          checksumError = error;
        }
      }
      const settled = await Promise.allSettled(tasks);
      if (checksumError) throw checksumError;
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      if (outShared !== target) target.set(outShared.subarray(0, meta.elementCount));
      return target;
    },

    async dispose() {
      if (disposed) return;
      disposed = true;
      const workers = pool.splice(0);
      for (const entry of workers) failPending(entry, new KernelsError('DISPOSED', 'worker decoder disposed', {}));
      await Promise.all(workers.map((entry) => entry.worker.terminate()));
    },
  };
}

function copyToShared(bytes: Uint8Array): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length));
  shared.set(bytes);
  return shared;
}

function rebuildError(error: Extract<DecodeTaskReply, { ok: false }>['error']): Error {
  if (error.splitZipCode) {
    const prefix = `${error.splitZipCode}: `;
    const message = error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
    return new SplitZipError(error.splitZipCode, message, error.details);
  }
  return new KernelsError('WORKER_FAILED', `decode worker failed: ${error.message}`, {});
}
