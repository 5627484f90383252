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

/**
 * True when the holder is certainly not running, as the store judges it (isHolderDead: of this
 * host, and another boot, no such pid in its pid namespace, a zombie, or a pid now another
 * process's). A pid alone misjudged a build killed before a reboot, or one that ran as pid 1 in a
 * container: its pid now names another live process, and verify, inspect and gc said "being
 * created" for ever. Another host's or pid namespace's holder cannot be judged from here (false).
 */
export function isHolderGone(holder: LockHolderInfo): boolean {
  return holder.dead;
}

/** `pid 1234`, with the host where it is not this one's. */
export function describeHolder(holder: Pick<LockHolder, 'pid' | 'host'>): string {
  return holder.host === hostname() ? `pid ${holder.pid}` : `pid ${holder.pid} on ${holder.host}`;
}
