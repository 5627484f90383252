// Whether another writer holds a directory cache's writer lock right now, for the build's temp-file
// sweep: housekeeping that need not wait behind that writer (its commits will, for the whole lock
// timeout; the sweep's own wait came on top of it, unreported).
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { UNPARSEABLE_LOCK_STALE_MS } from '@splitzip/store';
import { isThisProcess, LOCK_FILE_NAME, readLockHolder } from './read-lock-holder.js';

/**
 * True when `cacheDir`'s lock file exists and is not this process's nor a dead holder's (one the
 * store takes over at once): a live writer (busy or stopped), another host's, or a lock file that
 * names no holder younger than UNPARSEABLE_LOCK_STALE_MS (or not a regular file). A moment's look:
 * the lock may change right after.
 */
export async function isWriterLockHeldElsewhere(cacheDir: string): Promise<boolean> {
  const path = join(cacheDir, LOCK_FILE_NAME);
  const present = await lstat(path).then(
    () => true,
    () => false,
  );
  if (!present) return false;
  const holder = await readLockHolder(cacheDir);
  if (holder === undefined) {
    // Unparseable, or released between the two looks. An old unparseable one (a power loss) the
    // store takes over at once, as it does a dead holder's: held by nobody. Counting it held left
    // the temp files for ever on a cache whose builds commit nothing (no commit takes the lock over).
    const info = await lstat(path).catch(() => undefined);
    if (info === undefined) return false;
    return !info.isFile() || Date.now() - info.mtimeMs <= UNPARSEABLE_LOCK_STALE_MS;
  }
  return !holder.dead && !isThisProcess(holder);
}
