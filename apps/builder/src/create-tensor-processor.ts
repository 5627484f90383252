// Runs the per-tensor calibration work (exponent histogram + Top-16 codebook, SHA-256 of a tensor
// that passes the gate) on a pool of worker threads, or on the calling thread for `jobs: 0`. The
// bytes travel to a worker by transfer and come back with the answer (nothing is copied), for the
// main thread to encode from and to pool.
import { Worker } from 'node:worker_threads';
import type { BufferPool } from './create-buffer-pool.js';
import { BuilderError } from './errors.js';
import { calibrateTensor, type TensorCalibration } from './tensor-tasks.js';
import { deserializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

export type CalibratedBytes = TensorCalibration & { bytes: Uint8Array };

export interface TensorProcessor {
  readonly jobs: number;
  /**
   * Takes ownership of `bytes` (a pool buffer at offset 0: it is transferred) and returns them
   * with their calibration, now the caller's again. On failure the bytes go back to the pool.
   */
  calibrate(bytes: Uint8Array, coverageMin: number): Promise<CalibratedBytes>;
  /** Terminates the workers; pending and later work is rejected. */
  close(): Promise<void>;
}

export async function createTensorProcessor(options: { jobs: number; pool: BufferPool }): Promise<TensorProcessor> {
  return options.jobs <= 0 ? createInProcessProcessor(options.pool) : createWorkerProcessor(options.jobs, options.pool);
}

const stoppedError = (): BuilderError => new BuilderError('INTERRUPTED', 'the calibration workers were stopped');

/** A FIFO of idle slots with waiters: acquire() resolves when one frees up. */
function createSlotQueue<T>(slots: T[]) {
  const idle = [...slots];
  const waiters: { resolve: (slot: T) => void; reject: (error: Error) => void }[] = [];
  let closedError: Error | null = null;
  return {
    acquire(): Promise<T> {
      if (closedError) return Promise.reject(closedError);
      const slot = idle.shift();
      if (slot !== undefined) return Promise.resolve(slot);
      return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
    },
    give(slot: T): void {
      const waiter = waiters.shift();
      if (waiter) waiter.resolve(slot);
      else idle.push(slot);
    },
    /** Rejects every waiter and every later acquire. */
    close(error: Error): void {
      closedError ??= error;
      for (const waiter of waiters.splice(0)) waiter.reject(closedError);
    },
  };
}

function createInProcessProcessor(pool: BufferPool): TensorProcessor {
  let closed: Error | null = null;
  return {
    jobs: 0,
    async calibrate(bytes, coverageMin) {
      try {
        if (closed) throw closed;
        return { ...calibrateTensor(bytes, coverageMin), bytes };
      } catch (error) {
        pool.release(bytes.buffer);
        throw error;
      }
    },
    async close() {
      closed ??= stoppedError();
    },
  };
}

interface WorkerHandle {
  worker: Worker;
  pending: Map<number, { resolve: (reply: WorkerReply) => void; reject: (error: Error) => void }>;
  failure: Error | null;
}

async function createWorkerProcessor(jobs: number, pool: BufferPool): Promise<TensorProcessor> {
  const workerUrl = new URL('./hash-worker.js', import.meta.url);
  let nextId = 1;
  let closing = false;

  const handles: WorkerHandle[] = [];
  const ready: Promise<void>[] = [];
  for (let i = 0; i < jobs; i++) {
    const worker = new Worker(workerUrl);
    const handle: WorkerHandle = { worker, pending: new Map(), failure: null };
    handles.push(handle);
    ready.push(
      new Promise((resolve, reject) => {
        const fail = (error: Error): void => {
          handle.failure ??= error;
          reject(error);
          for (const { reject: rejectPending } of handle.pending.values()) rejectPending(error);
          handle.pending.clear();
        };
        worker.on('message', (reply: WorkerReply) => {
          if (reply.type === 'ready') return resolve();
          // A buffer coming back with an error goes straight back to the pool.
          if (reply.type === 'error' && reply.buffer) pool.release(reply.buffer);
          const waiter = handle.pending.get(reply.id);
          if (!waiter) return;
          handle.pending.delete(reply.id);
          if (reply.type === 'error') waiter.reject(deserializeError(reply.error));
          else waiter.resolve(reply);
        });
        worker.on('error', (error) => fail(new BuilderError('WORKER_FAILED', `calibration worker failed: ${error.message}`, {}, { cause: error })));
        worker.on('exit', (code) => {
          if (!closing) fail(new BuilderError('WORKER_FAILED', `calibration worker exited unexpectedly (code ${code})`));
        });
      }),
    );
  }
  try {
    await Promise.all(ready);
  } catch (error) {
    closing = true;
    await Promise.all(handles.map((h) => h.worker.terminate()));
    throw error;
  }

  const queue = createSlotQueue(handles);
  return {
    jobs,
    async calibrate(bytes, coverageMin) {
      let handle: WorkerHandle;
      try {
        // Pool buffers are whole ArrayBuffers; the view may be shorter (a reused, larger buffer).
        if (bytes.byteOffset !== 0) throw new Error('tensor bytes must start at the start of their buffer');
        handle = await queue.acquire();
      } catch (error) {
        pool.release(bytes.buffer);
        throw error;
      }
      try {
        if (handle.failure) {
          pool.release(bytes.buffer);
          throw handle.failure;
        }
        const id = nextId++;
        const buffer = bytes.buffer;
        const length = bytes.byteLength;
        // Shared memory is read in place and stays ours; an ArrayBuffer is transferred (no copy),
        // is the worker's until it comes back with the answer or the error.
        const shared = buffer instanceof SharedArrayBuffer;
        const reply = await new Promise<WorkerReply>((resolve, reject) => {
          handle.pending.set(id, { resolve, reject });
          handle.worker.postMessage({ type: 'calibrate', id, buffer, byteLength: length, coverageMin } satisfies WorkerRequest, shared ? [] : [buffer as ArrayBuffer]);
        }).catch((error: unknown) => {
          if (shared) pool.release(buffer);
          throw error;
        });
        if (reply.type !== 'calibrated') throw new Error(`unexpected worker reply ${reply.type}`);
        return { ...reply.calibration, bytes: shared ? bytes : new Uint8Array(reply.buffer!, 0, length) };
      } finally {
        queue.give(handle);
      }
    },
    async close() {
      if (closing) return;
      closing = true;
      const error = stoppedError();
      queue.close(error);
      for (const handle of handles) {
        handle.failure ??= error;
        for (const { reject } of handle.pending.values()) reject(error);
        handle.pending.clear();
      }
      await Promise.all(handles.map((h) => h.worker.terminate()));
    },
  };
}
