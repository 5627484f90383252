import { setMaxListeners } from 'node:events';

/** Per caller signal: the loads following it, and the one listener that aborts them. */
interface Followers {
  inner: Set<AbortController>;
  onAbort: () => void;
}
const followersOf = new WeakMap<AbortSignal, Followers>();

/**
 * A signal of the load's own that follows the caller's. A load waits on many things at once
 * (staging slots, reads, decode jobs: concurrency x stages), each with an abort listener; on the
 * caller's signal that passed Node's limit of 10 and printed a MaxListenersExceededWarning. The
 * load's own signal has no limit, and every load following one caller's signal shares a single
 * listener on it (a server that passes one shutdown signal to many concurrent loads), removed with
 * the last of them. The caller's signal is left as it was (no limit raised on another's object).
 */
export function linkAbortSignal(outer: AbortSignal | undefined): { signal: AbortSignal | undefined; unlink(): void } {
  if (outer === undefined) return { signal: undefined, unlink: () => {} };
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  if (outer.aborted) {
    controller.abort(outer.reason);
    return { signal: controller.signal, unlink: () => {} };
  }
  let followers = followersOf.get(outer);
  if (followers === undefined) {
    const inner = new Set<AbortController>();
    const onAbort = (): void => {
      followersOf.delete(outer);
      for (const follower of inner) follower.abort(outer.reason);
      inner.clear();
    };
    followers = { inner, onAbort };
    followersOf.set(outer, followers);
    outer.addEventListener('abort', onAbort, { once: true });
  }
  followers.inner.add(controller);
  const current = followers;
  return {
    signal: controller.signal,
    unlink: () => {
      if (!current.inner.delete(controller) || current.inner.size > 0) return;
      followersOf.delete(outer);
      outer.removeEventListener('abort', current.onAbort);
    },
  };
}
