// Says when a build waits for another writer's lock: the store waits for it silently (up to its
// lock timeout, 30 s by default, then LOCK_TIMEOUT), and a stopped writer made a build look hung.
// The store has no hook for it, so the build watches the lock file while a call that may take the
// lock is pending, and reports (an event: the library never prints) a holder that keeps it.
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { UNPARSEABLE_LOCK_STALE_MS } from '@splitzip/store';
import { describeHolder, isThisProcess, LOCK_FILE_NAME, readLockHolder, type LockHolderInfo } from './read-lock-holder.js';

/**
 * How long one holding of the lock by another process must last, seen while a call of this build
 * that may take it is pending, before the build says it waits: commits hold it for milliseconds.
 */
export const LOCK_WAIT_NOTICE_MS = 1500;
/** How often the lock file is read while such a call is pending. */
export const LOCK_WATCH_INTERVAL_MS = 250;

export interface WriterLockWatch {
  /**
   * Watches the lock while `task` (a store call that may wait for the writer lock) is pending;
   * returns it. With `waitingFrom`, only once that has resolved: a commit stages its blob (writes
   * the payload, seconds for a large one) before it asks for the lock, and another writer's
   * holding meanwhile is no wait of this build's.
   */
  during<T>(task: Promise<T>, waitingFrom?: Promise<unknown>): Promise<T>;
  /** Stops watching (idempotent). */
  stop(): void;
}

export interface WatchWriterLockOptions {
  /** Called once per holding of the lock (its token) that lasts LOCK_WAIT_NOTICE_MS while a call waits. */
  onWait(holder: LockHolderInfo, heldMs: number): void;
  /**
   * Called once per lock file that names no holder (unparseable: damaged, or not ours) and stays
   * LOCK_WAIT_NOTICE_MS while a call waits: the store takes such a file over only once it is
   * UNPARSEABLE_LOCK_STALE_MS old, and the build waited that long in silence.
   */
  onUnreadable?: ((heldMs: number) => void) | undefined;
  noticeAfterMs?: number | undefined;
  intervalMs?: number | undefined;
  now?: (() => number) | undefined;
}

/** A watch of the writer lock of the directory cache `cacheDir`. */
export function watchWriterLock(cacheDir: string, options: WatchWriterLockOptions): WriterLockWatch {
  const noticeAfterMs = options.noticeAfterMs ?? LOCK_WAIT_NOTICE_MS;
  const intervalMs = options.intervalMs ?? LOCK_WATCH_INTERVAL_MS;
  const now = options.now ?? (() => performance.now());
  let pending = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let reading = false;
  // The holding seen, since when; and the holdings already reported.
  let seen: { token: string; sinceMs: number } | undefined;
  const told = new Set<string>();

  const look = async (): Promise<void> => {
    if (reading) return;
    reading = true;
    try {
      const holder = await readLockHolder(cacheDir);
      // No holder named: no lock file, or one that cannot be parsed (its inode and time name it).
      const unreadable = holder === undefined ? await lstat(join(cacheDir, LOCK_FILE_NAME)).catch(() => undefined) : undefined;
      if (stopped || pending === 0) return;
      const token = holder !== undefined ? holder.token : unreadable !== undefined ? `unreadable:${unreadable.ino}:${unreadable.mtimeMs}` : undefined;
      if (token === undefined || (holder !== undefined && isThisProcess(holder))) {
        seen = undefined;
        return;
      }
      if (seen?.token !== token) {
        seen = { token, sinceMs: now() };
        return;
      }
      const heldMs = now() - seen.sinceMs;
      if (heldMs >= noticeAfterMs && !told.has(token)) {
        told.add(token);
        if (holder !== undefined) options.onWait(holder, heldMs);
        else options.onUnreadable?.(heldMs);
      }
    } finally {
      reading = false;
    }
  };

  const halt = (): void => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
    seen = undefined;
  };

  return {
    during(task, waitingFrom) {
      if (stopped) return task;
      let settled = false;
      let counted = false;
      const count = (): void => {
        if (settled || stopped) return;
        counted = true;
        pending++;
        if (timer === undefined) {
          timer = setInterval(() => void look().catch(() => {}), intervalMs);
          // The watch never keeps the process alive: the call it watches does.
          timer.unref();
          void look().catch(() => {});
        }
      };
      if (waitingFrom === undefined) count();
      else waitingFrom.then(count, () => {});
      return task.finally(() => {
        settled = true;
        if (!counted) return;
        pending--;
        if (pending === 0) halt();
      });
    },
    stop() {
      stopped = true;
      halt();
    },
  };
}

/** What the CLI says of a wait on a lock file that names no holder: one line. */
export function describeUnreadableLockWait(cache: string): string {
  return `waiting for the writer lock of ${cache}: its lock file names no holder (damaged, or not this tool's), and is taken over once ${Math.round(UNPARSEABLE_LOCK_STALE_MS / 1000)} s old`;
}

/** What the CLI says of a wait (`splitzip <command>: ` before it): one line. */
export function describeLockWait(cache: string, wait: { pid: number; host: string; lockTimeoutMs: number }): string {
  const holder = describeHolder(wait);
  return `waiting for the writer lock of ${cache}, held by ${holder} (another build or gc of this cache, busy or stopped); gives up after ${Math.round(wait.lockTimeoutMs / 1000)} s`;
}
