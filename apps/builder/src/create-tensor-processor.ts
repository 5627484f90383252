// Runs the per-tensor CPU work (hash, calibrate, encode) on a pool of worker threads, or in the
// calling thread for `jobs: 0`. A slot is held from `analyze` to `encode`/`release`: the worker keeps
// the tensor's bytes in between, so nothing is copied twice.
import { Worker } from 'node:worker_threads';
import { createValuesEncoder, type EncodeBackend, type ValuesEncoder } from './create-values-encoder.js';
import { BuilderError } from './errors.js';
import { analyzeTensor, encodeTensor, type TensorAnalysis, type TensorEncoding } from './tensor-tasks.js';
import { deserializeError, type WorkerReply, type WorkerRequest } from './worker-messages.js';

export interface TensorSlot {
  /** Takes ownership of `bytes` (its buffer is transferred to a worker and detached here). */
  analyze(bytes: Uint8Array, shape: readonly number[], chunkSize: number): Promise<TensorAnalysis>;
  encode(): Promise<TensorEncoding>;
  /** Drops the held bytes and returns the slot to the pool. Call exactly once. */
  release(): void;
}

export interface TensorProcessor {
  readonly backend: string;
  readonly fallbackReason: string | null;
  readonly jobs: number;
  acquire(): Promise<TensorSlot>;
  /** Terminates the workers; pending work is rejected. */
  close(): Promise<void>;
}

export async function createTensorProcessor(options: { jobs: number; backend: EncodeBackend }): Promise<TensorProcessor> {
  return options.jobs <= 0 ? createInProcessProcessor(options.backend) : createWorkerProcessor(options.jobs, options.backend);
}

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

const closedError = (): BuilderError => new BuilderError('INTERRUPTED', 'the encode workers were stopped');

async function createInProcessProcessor(backend: EncodeBackend): Promise<TensorProcessor> {
  const encoder: ValuesEncoder = await createValuesEncoder(backend);
  const queue = createSlotQueue([0]);
  return {
    backend: encoder.backend,
    fallbackReason: encoder.fallbackReason,
    jobs: 0,
    async acquire() {
      await queue.acquire();
      let held: { bytes: Uint8Array; analysis: TensorAnalysis; chunkSize: number } | null = null;
      return {
        async analyze(bytes, shape, chunkSize) {
          const analysis = analyzeTensor(bytes, shape);
          held = { bytes, analysis, chunkSize };
          return analysis;
        },
        async encode() {
          if (!held) throw new Error('encode before analyze');
          const { bytes, analysis, chunkSize } = held;
          held = null;
          return encodeTensor(bytes, analysis.exponents, chunkSize, encoder.encode);
        },
        release() {
          held = null;
          queue.give(0);
        },
      };
    },
    async close() {
      queue.close(closedError());
    },
  };
}

interface WorkerHandle {
  worker: Worker;
  pending: Map<number, { resolve: (reply: WorkerReply) => void; reject: (error: Error) => void }>;
  failure: Error | null;
}

async function createWorkerProcessor(jobs: number, backend: EncodeBackend): Promise<TensorProcessor> {
  const workerUrl = new URL('./encode-worker.js', import.meta.url);
  let nextId = 1;
  let closing = false;

  const handles: WorkerHandle[] = [];
  const ready: Promise<{ backend: string; fallbackReason: string | null }>[] = [];
  for (let i = 0; i < jobs; i++) {
    const worker = new Worker(workerUrl, { workerData: { backend } });
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
          if (reply.type === 'ready') return resolve(reply);
          if (reply.type === 'error' && reply.id === -1) return fail(deserializeError(reply.error));
          const waiter = handle.pending.get(reply.id);
          if (!waiter) return;
          handle.pending.delete(reply.id);
          if (reply.type === 'error') waiter.reject(deserializeError(reply.error));
          else waiter.resolve(reply);
        });
        worker.on('error', (error) => fail(new BuilderError('WORKER_FAILED', `encode worker failed: ${error.message}`, {}, { cause: error })));
        worker.on('exit', (code) => {
          if (!closing) fail(new BuilderError('WORKER_FAILED', `encode worker exited unexpectedly (code ${code})`));
        });
      }),
    );
  }
  let info: { backend: string; fallbackReason: string | null };
  try {
    [info] = (await Promise.all(ready)) as [{ backend: string; fallbackReason: string | null }];
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
    backend: info.backend,
    fallbackReason: info.fallbackReason,
    jobs,
    async acquire() {
      const handle = await queue.acquire();
      const id = nextId++;
      let released = false;
      return {
        async analyze(bytes, shape, chunkSize) {
          // Transfer only a buffer the view owns entirely; otherwise copy (never detach a caller's pool).
          const owned = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
          const buffer = owned.buffer as ArrayBuffer;
          const reply = await request(
            handle,
            { type: 'analyze', id, buffer, byteLength: owned.byteLength, shape: [...shape], chunkSize },
            [buffer],
          );
          if (reply.type !== 'analyzed') throw new Error(`unexpected worker reply ${reply.type}`);
          return reply.analysis;
        },
        async encode() {
          const reply = await request(handle, { type: 'encode', id });
          if (reply.type !== 'encoded') throw new Error(`unexpected worker reply ${reply.type}`);
          return { payload: new Uint8Array(reply.payload, 0, reply.payloadBytes), sha256: reply.sha256 };
        },
        release() {
          if (released) return;
          released = true;
          if (!handle.failure) handle.worker.postMessage({ type: 'drop', id } satisfies WorkerRequest);
          queue.give(handle);
        },
      };
    },
    async close() {
      if (closing) return;
      closing = true;
      const error = closedError();
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
