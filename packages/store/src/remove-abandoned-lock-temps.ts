// The temp files a lock attempt leaves when its process is killed between writing the holder
// record and unlinking it (write-lock.ts tryCreateLock): a cache used only by loaders (which
// take the lock to persist slice aliases) runs no build sweep and no gc, so they piled up there.
import { lstat, readdir, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { LOCK_TEMP_MIN_AGE_MS } from './limits.js';
import { isAbandonedTemp, TEMP_FILE_PATTERN } from './remove-abandoned-temp-files.js';

/**
 * Removes the abandoned temp files of the lock at `lockPath` and of its break markers
 * (`<lock>.tmp-…`, `<lock>.break-<id>.tmp-…`), judged as gc judges temp files (isAbandonedTemp: a
 * dead pid of this pid space, or older than TEMP_FILE_MAX_AGE_MS) and at least LOCK_TEMP_MIN_AGE_MS
 * old, so a live writer's attempt is never touched (even where a pid space is misjudged: its temp
 * lives for milliseconds, and a removed one failed its link with IO_ERROR). Only the lock's directory is listed (the cache root: a handful of names, no
 * blob), and only names of the lock's are looked at. Best effort: returns the names removed and
 * never throws, so a sweep that fails never fails the acquisition that ran it.
 */
export async function removeAbandonedLockTemps(lockPath: string): Promise<string[]> {
  const dir = dirname(lockPath);
  const prefix = `${basename(lockPath)}.`;
  const removed: string[] = [];
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return removed;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !TEMP_FILE_PATTERN.test(name)) continue;
    try {
      const info = await lstat(join(dir, name));
      if (Date.now() - info.mtimeMs < LOCK_TEMP_MIN_AGE_MS) continue;
      if (!isAbandonedTemp({ dir: '', name, sizeBytes: info.size, mtimeMs: info.mtimeMs, isFile: info.isFile() })) continue;
      await unlink(join(dir, name));
      removed.push(name);
    } catch {
      // Gone meanwhile (another sweep), or not removable now: the next acquisition tries again.
    }
  }
  return removed;
}
