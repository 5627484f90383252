import { abortedError } from './errors.js';

/**
 * A backend's result, or ABORTED once the load's `signal` fires first: a decode that never settles
 * (a custom backend, a hung device) held an aborted load for good. `onAbandoned` then gets a
 * promise that settles with the decode, for the memory it may still use. Without a signal, or for
 * a result that is not a promise, the result as it is (nothing added to the hot path).
 */
export function settleUnlessAborted<T>(work: T | PromiseLike<T>, signal: AbortSignal | undefined, name: string, onAbandoned: (settled: Promise<unknown>) => void): T | Promise<T> {
  if (signal === undefined || typeof (work as { then?: unknown } | null)?.then !== 'function') return work as T;
  const settling = Promise.resolve(work);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      onAbandoned(settling.then(() => undefined, () => undefined));
      reject(abortedError(`load of ${name} aborted`, signal, { tensor: name }));
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    settling.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
