// What a stopped gc or writer can leave that the next `splitzip gc` clears, for verify to mention:
// blobs no entry references (a drop whose unlinks a second Ctrl-C cut short, a crashed writer), the
// locks of dead holders and their temp files. They are no damage: every entry still has its blob.
import { isStoreError, type CacheStore } from '@splitzip/store';

/** The leftovers gc's dry run found (its GcReport's fields of the same names). */
export interface CacheLeftovers {
  /** Blob files (s3://: objects older than gc's default --min-age) no entry references, relative paths. */
  orphanBlobs: string[];
  orphanBytes: number;
  /** Directory caches: the writer lock of a dead holder (`lock`) and its break markers (`lock.break-*`). */
  staleLocks: string[];
  /**
   * Temp files of dead writers that gc removes (directory caches: `blobs/.tmp-<pid>-*` of a writer
   * killed mid-write; s3://: unfinished multipart uploads older than gc's default --min-age). Those
   * a live writer may still be writing (gc's keptTempFiles) are not leftovers.
   */
  tempFiles: string[];
}

/**
 * The store's gc dry run (one listing of the cache: no second walk here), cut to its orphan blobs,
 * stale locks and dead writers' temp files; null where gc refuses to look (a damaged journal, an older manifest copy beside
 * a newer journal: verify reports those as problems) or the look failed. Errors that are not the
 * store's (a bug) are thrown.
 */
export async function findCacheLeftovers(store: CacheStore): Promise<CacheLeftovers | null> {
  try {
    // On s3:// the store's default minimum age applies: a younger orphan may be a running build's.
    const gc = await store.gc({ dryRun: true });
    return { orphanBlobs: gc.orphanBlobs, orphanBytes: gc.orphanBytes, staleLocks: gc.staleLocks, tempFiles: gc.tempFiles };
  } catch (error) {
    if (!isStoreError(error)) throw error;
    return null;
  }
}
