import type { ByteReader } from './create-file-reader.js';
import { abortedError } from './errors.js';

/** A custom reader's read: `done` for the load to await, `settled` for whoever owns `target`. */
export interface AbortableRead {
  /** The reader's read, or ABORTED as soon as the signal fires, whether or not the reader stops. */
  done: Promise<void>;
  /**
   * Resolves (never rejects) once the reader's own promise has settled. A reader that ignores the
   * signal may write into `target` until then: the memory stays out of reuse (a staging slot is
   * given back to its pool only now), however early `done` rejected.
   */
  settled: Promise<void>;
}

/**
 * `reader.readExact(path, target, positionBytes, { signal })` (the signal only when the load has
 * one), ended by the load's abort even when the reader ignores the signal: a stalled read (a hung
 * network mount, a remote adapter waiting on a dead connection) held the load forever before.
 */
export function readExactAbortable(
  reader: ByteReader,
  path: string,
  target: Uint8Array,
  positionBytes: number,
  signal: AbortSignal | undefined,
  tensorName: string,
): AbortableRead {
  // Aborted already: no read is started (nothing can write into `target`).
  if (signal?.aborted === true) return { done: Promise.reject(abortedError(`load of ${tensorName} aborted`, signal, { tensor: tensorName, path })), settled: Promise.resolve() };
  let reading: Promise<void>;
  try {
    reading = Promise.resolve(signal === undefined ? reader.readExact(path, target, positionBytes) : reader.readExact(path, target, positionBytes, { signal }));
  } catch (error) {
    reading = Promise.reject(error);
  }
  const settled = reading.then(
    () => undefined,
    () => undefined,
  );
  if (signal === undefined) return { done: reading, settled };
  const aborted = () => abortedError(`load of ${tensorName} aborted`, signal, { tensor: tensorName, path });
  // Aborted inside the reader's synchronous part: no event comes, and a listener added now would
  // stay on the signal until the read settles (never, for a read that stalls ignoring it).
  if (signal.aborted) return { done: Promise.reject(aborted()), settled };
  const done = new Promise<void>((resolve, reject) => {
    // Removed by the abort (once) or by the read's settling, whichever comes first.
    const onAbort = () => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
    reading.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
  return { done, settled };
}
