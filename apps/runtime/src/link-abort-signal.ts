import { setMaxListeners } from 'node:events';

/**
 * A signal of the load's own that follows the caller's, through one listener on the caller's. A
 * load waits on many things at once (staging slots, reads, decode jobs: concurrency x stages),
 * each with an abort listener; on the caller's signal that passed Node's limit of 10 and printed a
 * MaxListenersExceededWarning. The load's own signal has no such limit, and the caller's is left
 * as it was (no limit raised on someone else's object).
 */
export function linkAbortSignal(outer: AbortSignal | undefined): { signal: AbortSignal | undefined; unlink(): void } {
  if (outer === undefined) return { signal: undefined, unlink: () => {} };
  const inner = new AbortController();
  setMaxListeners(0, inner.signal);
  if (outer.aborted) {
    inner.abort(outer.reason);
    return { signal: inner.signal, unlink: () => {} };
  }
  const follow = (): void => inner.abort(outer.reason);
  outer.addEventListener('abort', follow, { once: true });
  return { signal: inner.signal, unlink: () => outer.removeEventListener('abort', follow) };
}
