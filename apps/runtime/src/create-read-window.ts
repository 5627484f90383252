import { argumentError } from './check-load-arguments.js';
import { abortedError } from './errors.js';

/**
 * Default bytes a load reads at once (blobs and raw tensors together). Behind a slow link (network
 * storage, an object store, the 1 GB/s paced reader) eight parallel reads share the link, so all
 * eight tensors arrive together, late, and then queue for the decoder while the link idles; with a
 * window of a few tensors each arrives at full link speed and decodes while the next one is read.
 * 32 MiB keeps at least one read and usually two in flight for typical LLM tensors, and lets many
 * small ones overlap their per-request latency. Measured in bench/run-bench.mjs (paced scenario).
 */
export const DEFAULT_READ_WINDOW_BYTES = 32 * 1024 * 1024;

/** Grants reads in request order while the bytes in flight stay within the window. */
export interface ReadWindow {
  /**
   * Waits until a read of `bytes` may start (FIFO; a read larger than the window starts alone),
   * then returns its release function (idempotent).
   */
  acquire(bytes: number, signal?: AbortSignal): Promise<() => void>;
  /**
   * The same grant without waiting: the release function when the read may start now (no read
   * queued ahead, room in the window), else undefined. A load issues its reads in model order
   * within one turn of the event loop this way: awaiting an immediate grant cost each read a
   * microtask turn, and the cache path's longer await chain let ~30 small reads go first (their
   * synchronous open and read: the default model's first large read was asked 0.4 ms late).
   */
  tryAcquire(bytes: number): (() => void) | undefined;
  /** Bytes granted and not yet released. */
  readonly inFlightBytes: number;
}

interface Waiter {
  bytes: number;
  grant: (release: () => void) => void;
  fail: (error: unknown) => void;
}

/** A FIFO byte window over reads: see {@link DEFAULT_READ_WINDOW_BYTES} for why loads use one. */
export function createReadWindow(maxBytes: number): ReadWindow {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw argumentError('readWindowBytes', 'a whole number of bytes >= 1', maxBytes);
  }
  let inFlightBytes = 0;
  let inFlightReads = 0;
  const queue: Waiter[] = [];

  const fits = (bytes: number) => inFlightReads === 0 || inFlightBytes + bytes <= maxBytes;

  // Strict FIFO: the head waits for room even when a smaller read behind it would fit, so a large
  // tensor is never starved by a stream of small ones.
  const grantWaiters = () => {
    while (queue.length > 0 && fits(queue[0]!.bytes)) {
      const next = queue.shift()!;
      inFlightBytes += next.bytes;
      inFlightReads += 1;
      next.grant(makeRelease(next.bytes));
    }
  };

  function makeRelease(bytes: number): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      inFlightBytes -= bytes;
      inFlightReads -= 1;
      grantWaiters();
    };
  }

  return {
    get inFlightBytes() {
      return inFlightBytes;
    },
    tryAcquire(bytes) {
      if (queue.length > 0 || !fits(bytes)) return undefined;
      inFlightBytes += bytes;
      inFlightReads += 1;
      return makeRelease(bytes);
    },
    acquire(bytes, signal) {
      if (signal?.aborted) {
        return Promise.reject(abortedError('read aborted while waiting for the read window', signal));
      }
      if (queue.length === 0 && fits(bytes)) {
        inFlightBytes += bytes;
        inFlightReads += 1;
        return Promise.resolve(makeRelease(bytes));
      }
      return new Promise((resolve, reject) => {
        const waiter: Waiter = {
          bytes,
          grant: (release) => {
            signal?.removeEventListener('abort', onAbort);
            resolve(release);
          },
          fail: reject,
        };
        const onAbort = () => {
          const at = queue.indexOf(waiter);
          if (at < 0) return;
          queue.splice(at, 1);
          grantWaiters(); // the reads behind it may fit now
          waiter.fail(abortedError('read aborted while waiting for the read window', signal));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(waiter);
      });
    },
  };
}
