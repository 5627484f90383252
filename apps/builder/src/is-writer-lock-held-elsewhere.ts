// Whether another writer holds a directory cache's writer lock right now, for the build's temp-file
// sweep: housekeeping that need not wait behind that writer (its commits will, for the whole lock
// timeout; the sweep's own wait came on top of it, unreported).
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { isThisProcess, LOCK_FILE_NAME, readLockHolder } from './read-lock-holder.js';

/**
 * True when `cacheDir`'s lock file exists and is not this process's nor a dead holder's (one the
 * store takes over at once): a live writer (busy or stopped), another host's, or a lock file that
 * names no holder (taken over only once old). A moment's look: the lock may change right after.
 */
export async function isWriterLockHeldElsewhere(cacheDir: string): Promise<boolean> {
  const present = await lstat(join(cacheDir, LOCK_FILE_NAME)).then(
    () => true,
    () => false,
  );
  if (!present) return false;
  const holder = await readLockHolder(cacheDir);
  if (holder === undefined) {
    // Unparseable, or released between the two looks: held only if the file is still there.
    return lstat(join(cacheDir, LOCK_FILE_NAME)).then(
      () => true,
      () => false,
    );
  }
  return !holder.dead && !isThisProcess(holder);
}
