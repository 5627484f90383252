// Runs the per-tensor hashing work (SHA-1 content key, exponent histogram + calibration, SHA-256)
// on a pool of worker threads, or on the calling thread for `jobs: 0`. A slot is held from `hash`
// to `calibrate`/`release`: the worker keeps the tensor's bytes in between (nothing is copied), and
// hands the buffer back afterwards for the main thread to encode from and to pool.
import { Worker } from 'node:worker_threads';
import type { BufferPool } from './create-buffer-pool.js';
import { BuilderError } from './errors.js';
import { calibrateTensor, hashTensor, type TensorCalibration } from './tensor-tasks.js';
import { deserializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

export type CalibratedBytes = TensorCalibration & { bytes: Uint8Array };

export interface TensorSlot {
  /**
   * Takes ownership of `bytes` (a pool buffer at offset 0: it is transferred, and comes back).
   * With `calibrateAt` (a coverage gate) it calibrates too, in the same round trip, and the bytes
   * come back with the calibration (the caller's to encode from and pool); else the slot holds
   * them until `calibrate` or `release`.
   */
  hash(bytes: Uint8Array, shape: readonly number[], calibrateAt?: number): Promise<{ key: string; calibrated: CalibratedBytes | null }>;
  /** Calibrates; returns the bytes again (now the caller's: encode from them, then pool them). */
  calibrate(coverageMin: number): Promise<CalibratedBytes>;
  /** Gives the bytes back to the pool if still held, and frees the slot. Idempotent. */
  release(): void;
}

export interface TensorProcessor {
  readonly jobs: number;
  acquire(): Promise<TensorSlot>;
  /** Terminates the workers; pending and later work is rejected. */
  close(): Promise<void>;
}

export async function createTensorProcessor(options: { jobs: number; pool: BufferPool }): Promise<TensorProcessor> {
  return options.jobs <= 0 ? createInProcessProcessor(options.pool) : createWorkerProcessor(options.jobs, options.pool);
}

const stoppedError = (): BuilderError => new BuilderError('INTERRUPTED', 'the hashing workers were stopped');

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
  const queue = createSlotQueue([0]);
  return {
    jobs: 0,
    async acquire() {
      await queue.acquire();
      let held: Uint8Array | null = null;
      let released = false;
      return {
        async hash(bytes, shape, calibrateAt) {
          const key = hashTensor(bytes, shape);
          if (calibrateAt !== undefined) return { key, calibrated: { ...calibrateTensor(bytes, calibrateAt), bytes } };
          held = bytes;
          return { key, calibrated: null };
        },
        async calibrate(coverageMin) {
          if (!held) throw new Error('calibrate before hash');
          const bytes = held;
          held = null;
          return { ...calibrateTensor(bytes, coverageMin), bytes };
        },
        release() {
          if (released) return;
          released = true;
          if (held) pool.release(held.buffer as ArrayBuffer);
          held = null;
          queue.give(0);
        },
      };
    },
    async close() {
      queue.close(stoppedError());
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
          // Dropped buffers (and those coming back with an error) go straight back to the pool.
          if ((reply.type === 'dropped' || reply.type === 'error') && reply.buffer) pool.release(reply.buffer);
          const waiter = handle.pending.get(reply.id);
          if (!waiter) return;
          handle.pending.delete(reply.id);
          if (reply.type === 'error') waiter.reject(deserializeError(reply.error));
          else waiter.resolve(reply);
        });
        worker.on('error', (error) => fail(new BuilderError('WORKER_FAILED', `hashing worker failed: ${error.message}`, {}, { cause: error })));
        worker.on('exit', (code) => {
          if (!closing) fail(new BuilderError('WORKER_FAILED', `hashing worker exited unexpectedly (code ${code})`));
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
  const request = (handle: WorkerHandle, message: WorkerRequest, transfer: ArrayBuffer[] = []): Promise<WorkerReply> => {
    if (handle.failure) return Promise.reject(handle.failure);
    return new Promise((resolve, reject) => {
      handle.pending.set(message.id, { resolve, reject });
      handle.worker.postMessage(message, transfer);
    });
  };

  return {
    jobs,
    async acquire() {
      const handle = await queue.acquire();
      const id = nextId++;
      let held = false;
      let released = false;
      let length = 0;
      return {
        async hash(bytes, shape, calibrateAt) {
          // Pool buffers are whole ArrayBuffers; the view may be shorter (a reused, larger buffer).
          if (bytes.byteOffset !== 0) throw new Error('tensor bytes must start at the start of their buffer');
          const buffer = bytes.buffer as ArrayBuffer;
          length = bytes.byteLength;
          held = calibrateAt === undefined;
          try {
            const message: WorkerRequest = { type: 'hash', id, buffer, byteLength: length, shape: [...shape] };
            if (calibrateAt !== undefined) message.coverageMin = calibrateAt;
            const reply = await request(handle, message, [buffer]);
            if (reply.type !== 'hashed') throw new Error(`unexpected worker reply ${reply.type}`);
            if (!reply.calibration || !reply.buffer) return { key: reply.key, calibrated: null };
            return { key: reply.key, calibrated: { ...reply.calibration, bytes: new Uint8Array(reply.buffer, 0, length) } };
          } catch (error) {
            held = false; // the worker sent the buffer back with its error
            throw error;
          }
        },
        async calibrate(coverageMin) {
          held = false;
          const reply = await request(handle, { type: 'calibrate', id, coverageMin });
          if (reply.type !== 'calibrated') throw new Error(`unexpected worker reply ${reply.type}`);
          return { ...reply.calibration, bytes: new Uint8Array(reply.buffer, 0, length) };
        },
        release() {
          if (released) return;
          released = true;
          // The worker answers 'dropped' with the buffer, which the message handler pools.
          if (held && !handle.failure) handle.worker.postMessage({ type: 'drop', id } satisfies WorkerRequest);
          held = false;
          queue.give(handle);
        },
      };
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
