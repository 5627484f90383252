// Who holds a directory cache's writer lock, for the CLI to name a writer it waits on: the store
// decides who holds the lock and waits for it silently; it also reads and judges the lock file
// (readWriteLockHolder), and these helpers only word what it says.
import { hostname } from 'node:os';
import { join } from 'node:path';
import { readWriteLockHolder, type LockHolder } from '@splitzip/store';

/** The writer lock's file in a cache directory (the store's `<root>/lock`). */
export const LOCK_FILE_NAME = 'lock';

/** The lock's holder and whether the store judges it dead (gone: not running any more). */
export type LockHolderInfo = LockHolder & { dead: boolean };

/**
 * The holder the lock file of `cacheDir` names; undefined when there is none, or it cannot be read
 * or parsed (a lock being replaced, a planted FIFO).
 */
export function readLockHolder(cacheDir: string): Promise<LockHolderInfo | undefined> {
  return readWriteLockHolder(join(cacheDir, LOCK_FILE_NAME));
}

/** This very process (its own commit holding the lock). */
export function isThisProcess(holder: Pick<LockHolder, 'pid' | 'host'>): boolean {
  return holder.pid === process.pid && holder.host === hostname();
}

/** `pid 1234`, with the host where it is not this one's. */
export function describeHolder(holder: Pick<LockHolder, 'pid' | 'host'>): string {
  return holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on ${holder.host}`;
}
