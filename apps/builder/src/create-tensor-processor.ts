// Runs the per-tensor work (the content key's SHA-1, exponent histogram + Top-16 codebook, and on
// the codec path the encoding and, for an s3:// cache, the payload's SHA-256) on a pool of worker
// threads, or on the calling thread for `jobs: 0`. Tensors and payload buffers are views of the
// build's slab, which the workers share: they read and write them in place. The workers that fit
// any model start at once (a worker takes ~80 ms of CPU to start); the slab, and the number of
// workers that fit this model's memory bound (plan-build-memory.ts), follow once it is sized.
import type { Worker } from 'node:worker_threads';
import type { CodecArenaShare } from '@splitzip/codec';
import { computeContentKey } from '@splitzip/store/content-key';
import { BuilderError } from './errors.js';
import { calibrateAndEncode, type CalibratedPayload, type EncodeInto } from './tensor-tasks.js';
import { deserializeError, type CalibrateRequest, type WorkerReply, type WorkerRequest } from './worker-messages.js';
import { startWorker } from '@splitzip/kernels/start-worker';

type WorkerRequestWithId = Exclude<WorkerRequest, { type: 'slab' }>;

/** The calibration, and when encoded the payload (a view of `into.out`) and its blob digest. */
export type CalibratedTensor = CalibratedPayload;

export interface TensorProcessor {
  /** Worker threads running (0: the calling thread does the work). */
  readonly jobs: number;
  /**
   * Calibrates `bytes` (a view of the slab) and, with `into` (another view of it), encodes a tensor
   * that passes the gate into `into.out`. Both views stay the caller's throughout.
   */
  calibrate(bytes: Uint8Array, coverageMin: number, into?: EncodeInto): Promise<CalibratedTensor>;
  /**
   * The content key of `bytes` (a view of the slab) as BF16 of `shape`: one SHA-1 pass, on a
   * worker, so the main thread only reads and commits.
   */
  computeKey(bytes: Uint8Array, shape: readonly number[]): Promise<string>;
  /** Terminates the workers; pending and later work is rejected. */
  close(): Promise<void>;
}

/** What the build decided once the model was sized: its slab, and how many workers to run. */
export interface WorkerPlan {
  /** The slab's buffer on this thread (the views `calibrate` is given are of it). */
  slab: ArrayBufferLike;
  /** What worker `index` attaches to (the slab made with `threads: workers`). */
  share(index: number): CodecArenaShare;
  /** At least 1. */
  workers: number;
}

/**
 * `jobs` 0: everything on the calling thread. Else `startupJobs` workers start at once, and the
 * plan, once the model is sized, gives them the slab (before any request) and sets how many run:
 * start-up workers beyond it stop, further ones start then. A rejected plan stops the workers.
 */
export async function createTensorProcessor(options: { jobs: number; startupJobs: number; plan: Promise<WorkerPlan> }): Promise<TensorProcessor> {
  return options.jobs <= 0 ? createInProcessProcessor() : createWorkerProcessor(Math.min(options.jobs, options.startupJobs), options.plan);
}

/**
 * Requests a worker holds at once: the next one waits in its port while it works on the current
 * one, so it starts at once instead of after a round trip through the main thread, whose event
 * loop is often inside a synchronous SHA-1 of a tensor (~10 ms for 16.8 MB): with one at a time
 * the workers idled ~15 % of a build waiting for their next request (measured).
 */
export const REQUESTS_PER_WORKER = 2;

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
    /** Takes every idle copy of a slot out for good (one in use is the caller's to keep from giving back). */
    withdraw(slot: T): void {
      for (let at = idle.indexOf(slot); at !== -1; at = idle.indexOf(slot)) idle.splice(at, 1);
    },
    /** Rejects every waiter and every later acquire. */
    close(error: Error): void {
      closedError ??= error;
      for (const waiter of waiters.splice(0)) waiter.reject(closedError);
    },
  };
}

function createInProcessProcessor(): TensorProcessor {
  let closed: Error | null = null;
  return {
    jobs: 0,
    async calibrate(bytes, coverageMin, into) {
      if (closed) throw closed;
      return calibrateAndEncode(bytes, coverageMin, into);
    },
    async computeKey(bytes, shape) {
      if (closed) throw closed;
      return computeContentKey(bytes, shape, 'BF16');
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
  /** Terminated on purpose (a surplus start-up worker): its exit is no failure. */
  retired: boolean;
}

async function createWorkerProcessor(startupJobs: number, planReady: Promise<WorkerPlan>): Promise<TensorProcessor> {
  const workerUrl = new URL('./hash-worker.js', import.meta.url);
  let nextId = 1;
  let closing = false;
  const handles: WorkerHandle[] = [];
  // A worker joins the queue once it has started; the first failure of any fails every request
  // after it (the build stops at its first failure anyway).
  const queue = createSlotQueue<WorkerHandle>([]);

  const addWorker = (share: CodecArenaShare | null): WorkerHandle => {
    const worker = startWorker(workerUrl);
    const handle: WorkerHandle = { worker, pending: new Map(), failure: null, retired: false };
    handles.push(handle);
    const fail = (error: Error): void => {
      if (handle.retired) return; // stopped unused: nothing of the build depends on it
      handle.failure ??= error;
      queue.close(error);
      for (const { reject } of handle.pending.values()) reject(error);
      handle.pending.clear();
    };
    worker.on('message', (reply: WorkerReply) => {
      if (reply.type === 'ready') {
        if (!handle.retired && handle.failure === null) for (let i = 0; i < REQUESTS_PER_WORKER; i++) queue.give(handle);
        return;
      }
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
    // Messages to a worker arrive in order: the slab before any request.
    if (share) worker.postMessage({ type: 'slab', share });
    return handle;
  };

  for (let i = 0; i < startupJobs; i++) addWorker(null);
  let plan: WorkerPlan;
  try {
    plan = await planReady;
  } catch (error) {
    closing = true;
    await Promise.all(handles.map((h) => h.worker.terminate()));
    throw error;
  }
  const { slab, workers } = plan;
  // Start-up workers beyond the plan (a model with fewer tensors) go; those that fit get the slab
  // (worker i its share i: in a codec arena, a kernel scratch area of its own); the rest start
  // now, with it.
  for (const handle of handles.slice(workers)) {
    handle.retired = true;
    queue.withdraw(handle); // if it is ready already
    handle.worker.terminate().catch(() => {});
  }
  handles.splice(workers);
  handles.forEach((handle, index) => handle.worker.postMessage({ type: 'slab', share: plan.share(index) }));
  while (handles.length < workers) addWorker(plan.share(handles.length));

  /** Sends a request to the next free worker and waits for its answer. */
  const ask = async (request: WorkerRequestWithId): Promise<WorkerReply> => {
    const handle = await queue.acquire();
    try {
      if (handle.failure) throw handle.failure;
      return await new Promise<WorkerReply>((resolve, reject) => {
        handle.pending.set(request.id, { resolve, reject });
        handle.worker.postMessage(request);
      });
    } finally {
      queue.give(handle);
    }
  };

  return {
    jobs: handles.length,
    async calibrate(bytes, coverageMin, into) {
      if (bytes.buffer !== slab || (into && into.out.buffer !== slab)) throw new Error('the workers only see views of the slab');
      const request: CalibrateRequest = { type: 'calibrate', id: nextId++, offsetBytes: bytes.byteOffset, byteLength: bytes.byteLength, coverageMin };
      if (into) request.encodeInto = { offsetBytes: into.out.byteOffset, byteLength: into.out.byteLength, chunkSize: into.chunkSize, digest: into.digest !== false };
      const reply = await ask(request);
      if (reply.type !== 'calibrated') throw new Error(`unexpected worker reply ${reply.type}`);
      const payload = into && reply.payloadBytes !== null ? into.out.subarray(0, reply.payloadBytes) : null;
      return { ...reply.calibration, payload, payloadDigest: payload ? reply.payloadDigest : null };
    },
    async computeKey(bytes, shape) {
      if (bytes.buffer !== slab) throw new Error('the workers only see views of the slab');
      const reply = await ask({ type: 'key', id: nextId++, offsetBytes: bytes.byteOffset, byteLength: bytes.byteLength, shape: [...shape] });
      if (reply.type !== 'keyed') throw new Error(`unexpected worker reply ${reply.type}`);
      return reply.key;
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
