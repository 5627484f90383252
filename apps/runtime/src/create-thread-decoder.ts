import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { decodeChunks, verifyPayloadChecksum } from '@splitzip/codec';
import type { DecodeBackend } from './create-cpu-decoder.js';
import type { DecodeThreadJob, DecodeThreadReply } from './decode-thread.js';
import { RuntimeError } from './errors.js';

/** Decode threads by default: one per core, at most 4 (decode is memory-bound beyond that). */
export const DEFAULT_DECODE_THREADS = Math.max(1, Math.min(availableParallelism(), 4));

/** Tensors with fewer values go to one thread whole; larger ones are split across the threads. */
export const DEFAULT_SPLIT_MIN_VALUES = 1 << 20;

/**
 * Tensors with fewer values are decoded on the calling thread: below this a message round trip
 * to a worker (tens of microseconds) costs more than the decode (2^16 values ≈ 30 µs).
 */
export const DEFAULT_INLINE_MAX_VALUES = 1 << 16;

export interface ThreadDecoderOptions {
  threads?: number;
  splitMinValues?: number;
  /** Decode tensors below this many values on the calling thread (default DEFAULT_INLINE_MAX_VALUES). */
  inlineMaxValues?: number;
  /** The worker script (default: decode-thread.js beside the built module). */
  workerUrl?: URL;
}

export interface ThreadDecoderStats {
  jobs: number;
  /** Scratch SharedArrayBuffers allocated (payloads or outputs not already in shared memory). */
  scratchAllocations: number;
}

export interface ThreadDecoder extends DecodeBackend {
  readonly shared: true;
  readonly verifiesChecksum: true;
  stats(): ThreadDecoderStats;
}

interface PoolWorker {
  worker: Worker;
  busy: number;
}

/** Whether the built worker script exists (it does in the published package; not in a bundle that left it out). */
export function hasThreadWorker(): boolean {
  return existsSync(fileURLToPath(defaultWorkerUrl()));
}

function defaultWorkerUrl(): URL {
  const beside = new URL('./decode-thread.js', import.meta.url);
  if (existsSync(fileURLToPath(beside))) return beside;
  // Running from src/ (tests): the built worker.
  return new URL('../dist/decode-thread.js', import.meta.url);
}

/**
 * The runtime's worker-thread decode backend: the payload's checksum and the decode of its chunk
 * ranges run on `threads` worker threads, so the calling thread stays free to issue and complete
 * reads (this is what keeps a paced link busy). Payload and output are shared memory: the staging
 * pool's slots (loadModel makes them SharedArrayBuffers for this backend) and the caller's buffer
 * when it is a SharedArrayBuffer view; otherwise a reused shared scratch buffer is decoded into and
 * copied out on the calling thread. Workers start on the first decode and never keep the process alive.
 */
export function createThreadDecoder(options: ThreadDecoderOptions = {}): ThreadDecoder {
  const threads = options.threads ?? DEFAULT_DECODE_THREADS;
  if (!Number.isSafeInteger(threads) || threads < 1 || threads > 64) {
    throw new RuntimeError('INVALID_ARGUMENT', 'threads must be an integer in 1..64', { threads });
  }
  const splitMinValues = options.splitMinValues ?? DEFAULT_SPLIT_MIN_VALUES;
  const inlineMaxValues = options.inlineMaxValues ?? DEFAULT_INLINE_MAX_VALUES;
  const pool: PoolWorker[] = [];
  const pending = new Map<number, { resolve: (busyMs: number) => void; reject: (error: Error) => void; owner: PoolWorker }>();
  const scratch: SharedArrayBuffer[] = [];
  let nextId = 1;
  let jobs = 0;
  let scratchAllocations = 0;
  let closed = false;

  const spawn = (): PoolWorker => {
    const entry: PoolWorker = { worker: new Worker(options.workerUrl ?? defaultWorkerUrl()), busy: 0 };
    entry.worker.unref();
    entry.worker.on('message', (reply: DecodeThreadReply) => {
      const task = pending.get(reply.id);
      if (!task) return;
      pending.delete(reply.id);
      if (--entry.busy === 0) entry.worker.unref();
      if (reply.ok) task.resolve(reply.busyMs);
      else task.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    });
    const die = (error: Error) => {
      const index = pool.indexOf(entry);
      if (index >= 0) pool.splice(index, 1);
      for (const [id, task] of pending) {
        if (task.owner === entry) {
          pending.delete(id);
          task.reject(Object.assign(new Error(`decode thread died: ${error.message}`), { code: 'WORKER_FAILED' }));
        }
      }
    };
    entry.worker.on('error', die);
    entry.worker.on('exit', (code) => die(new Error(`exit code ${code}`)));
    return entry;
  };

  const dispatch = (job: Omit<DecodeThreadJob, 'id'>): Promise<number> => {
    while (pool.length < threads) pool.push(spawn());
    const owner = pool.reduce((best, w) => (w.busy < best.busy ? w : best), pool[0] as PoolWorker);
    const id = nextId++;
    jobs += 1;
    return new Promise<number>((resolve, reject) => {
      pending.set(id, { resolve, reject, owner });
      // Referenced while busy, so the process waits for the answer; idle workers never hold it open.
      if (owner.busy++ === 0) owner.worker.ref();
      owner.worker.postMessage({ ...job, id } satisfies DecodeThreadJob);
    });
  };

  const takeScratch = (bytes: number): SharedArrayBuffer => {
    const index = scratch.findIndex((buffer) => buffer.byteLength >= bytes);
    if (index >= 0) return scratch.splice(index, 1)[0] as SharedArrayBuffer;
    scratchAllocations += 1;
    return new SharedArrayBuffer(Math.max(256, bytes));
  };

  return {
    shared: true,
    verifiesChecksum: true,
    get name() {
      return `threads:${threads}`;
    },
    stats: () => ({ jobs, scratchAllocations }),
    async decode(payload, meta, out, decodeOptions) {
      if (closed) throw new RuntimeError('INVALID_ARGUMENT', 'thread decoder is closed');
      if (meta.elementCount < inlineMaxValues) {
        const startMs = performance.now();
        if (decodeOptions?.verifyChecksum) {
          try {
            verifyPayloadChecksum(payload, meta);
          } catch (error) {
            throw new RuntimeError('CACHE_READ_FAILED', `payload checksum: ${(error as Error).message}`, {}, { cause: error });
          }
        }
        decodeChunks(payload, meta, 0, meta.chunkCount, out);
        return performance.now() - startMs;
      }
      let payloadBuffer: SharedArrayBuffer;
      let payloadOffset: number;
      let payloadScratch: SharedArrayBuffer | undefined;
      if (payload.buffer instanceof SharedArrayBuffer) {
        payloadBuffer = payload.buffer;
        payloadOffset = payload.byteOffset;
      } else {
        payloadScratch = takeScratch(meta.compBytes);
        new Uint8Array(payloadScratch, 0, meta.compBytes).set(payload.subarray(0, meta.compBytes));
        payloadBuffer = payloadScratch;
        payloadOffset = 0;
      }
      const outBytes = 2 * meta.elementCount;
      const outShared = out.buffer instanceof SharedArrayBuffer;
      const outScratch = outShared ? undefined : takeScratch(outBytes);
      const outBuffer = outShared ? (out.buffer as SharedArrayBuffer) : (outScratch as SharedArrayBuffer);
      const outOffset = outShared ? out.byteOffset : 0;
      try {
        const tasks: Promise<number>[] = [];
        const base = { payload: payloadBuffer, payloadOffset, payloadLength: meta.compBytes };
        const checksum = decodeOptions?.verifyChecksum ? dispatch({ ...base, kind: 'checksum' }) : undefined;
        const parts = meta.elementCount >= splitMinValues ? Math.min(threads, meta.chunkCount) : Math.min(1, meta.chunkCount);
        for (let k = 0; k < parts; k += 1) {
          const firstChunk = Math.floor((k * meta.chunkCount) / parts);
          const endChunk = Math.floor(((k + 1) * meta.chunkCount) / parts);
          tasks.push(
            dispatch({ ...base, kind: 'decode', out: outBuffer, outOffset: outOffset + 2 * firstChunk * meta.chunkSize, firstChunk, chunkCount: endChunk - firstChunk }),
          );
        }
        // A corrupt payload is a cache-read failure (the blob), not a decode failure.
        const checked = checksum?.catch((error: Error & { code?: string }) => {
          throw new RuntimeError('CACHE_READ_FAILED', `payload checksum: ${error.message}`, { codecCode: error.code }, { cause: error });
        });
        const settled = await Promise.allSettled([...(checked ? [checked] : []), ...tasks]);
        const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
        if (failed) throw failed.reason;
        const copyStartMs = performance.now();
        if (outScratch !== undefined) out.set(new Uint16Array(outScratch, 0, meta.elementCount));
        // CPU time: the workers' jobs (summed over threads) plus the copy-out here.
        let busyMs = performance.now() - copyStartMs;
        for (const s of settled) if (s.status === 'fulfilled') busyMs += s.value;
        return busyMs;
      } finally {
        if (payloadScratch !== undefined) scratch.push(payloadScratch);
        if (outScratch !== undefined) scratch.push(outScratch);
      }
    },
    async close() {
      closed = true;
      const workers = pool.splice(0);
      await Promise.all(workers.map((entry) => entry.worker.terminate()));
    },
  };
}

let processThreadDecoder: ThreadDecoder | undefined;

/**
 * The process-wide thread decoder behind `backend: 'threads'`: started on first use, shared by every
 * load (its workers never keep the process alive), never closed.
 */
export function getSharedThreadDecoder(): ThreadDecoder {
  // Marked so that loads never close it.
  processThreadDecoder ??= Object.assign(createThreadDecoder(), { processWide: true as const });
  return processThreadDecoder;
}
