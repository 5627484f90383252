// The temp files writers killed mid-write leave (a staged blob is up to a whole payload: GBs on big
// models), judged as gc judges them, and a sweep of those alone that a writer can afford at every
// run: the builder calls it, so a re-run after a killed build cleans up after it without a gc.
import type { StorageBackend, StoredFile } from './backend.js';
import { isAbandonedTempFile, pidSpaceTag } from './write-lock.js';
import { isBlobsDirectoryOwn } from './check-blobs-directory.js';

/**
 * A writer's temp file name: `.tmp-<pid>-<16 hex>.<tag>` (blobs, manifest, journal, a lock being
 * made), `<tag>` the writer's pidSpaceTag(); names from before 2026-12-05 carry none.
 */
export const TEMP_FILE_PATTERN = /\.tmp-(\d+)-[0-9a-f]{16}(?:\.([0-9a-f]{8}))?/;

/**
 * Whether gc removes `file` as a temp file: a regular file named as a writer's temp file whose
 * writer is gone (isAbandonedTempFile: its pid is dead here, or it is older than
 * TEMP_FILE_MAX_AGE_MS). A pid is judged only in a name with this process's pid space tag: a cache
 * directory shared by containers (one host name, separate pids) or over NFS holds other writers'
 * temp files, whose pids mean nothing here (a live writer's staged blob, written outside the lock,
 * was removed as a dead pid's). Other and untagged names go by age. The one judgement of gc and
 * removeAbandonedTempFiles.
 */
export function isAbandonedTemp(file: StoredFile): boolean {
  if (!file.isFile) return false;
  const temp = TEMP_FILE_PATTERN.exec(file.name);
  return temp !== null && isAbandonedTempFile(Number(temp[1]), file.mtimeMs, temp[2] === pidSpaceTag());
}

/** What CacheStore.removeAbandonedTempFiles removed. */
export interface TempFilesReport {
  /** Relative paths, as GcReport.tempFiles names them. */
  tempFiles: string[];
  /** Their size in bytes, together. */
  tempBytes: number;
}

/**
 * Removes the temp files gc would remove, and nothing else (no orphan blob, journal or lock file),
 * under the writer lock as gc does (`runLocked`: a writer session). Looks without the lock first
 * and takes it only when there is one to remove, so a writer that calls this on every run waits
 * for no other writer and stats no blob (only names that look like temp files are looked at).
 */
export async function removeAbandonedTempFiles(backend: StorageBackend, runLocked: <T>(task: () => Promise<T>) => Promise<T>): Promise<TempFilesReport> {
  // Through a blobs/ that is not this cache's own (a link: check-blobs-directory.ts) its temp files
  // may be another cache's writers': left alone, the root's swept. Not refused as every other writer
  // is: the builder sweeps on every run, and the root is this cache's own.
  const list = async (): Promise<StoredFile[]> => {
    const ownBlobs = backend.describeBlobsDirectory === undefined || isBlobsDirectoryOwn((await backend.describeBlobsDirectory()).kind);
    return (await backend.listFiles((name) => TEMP_FILE_PATTERN.test(name))).filter((file) => (ownBlobs || file.dir !== 'blobs') && isAbandonedTemp(file));
  };
  if ((await list()).length === 0) return { tempFiles: [], tempBytes: 0 };
  return runLocked(async () => {
    // Judged again: another writer's gc or sweep may have removed some meanwhile.
    const files = await list();
    // A removal the file system refuses (a read-only blobs/) is NOT_WRITABLE: removeFile says so.
    for (const file of files) await backend.removeFile(file);
    return {
      tempFiles: files.map((file) => (file.dir ? `${file.dir}/${file.name}` : file.name)),
      tempBytes: files.reduce((sum, file) => sum + file.sizeBytes, 0),
    };
  });
}
