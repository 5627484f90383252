import { BLOB_DAMAGE_CODES, isStoreError, type CacheEntry, type CacheStore } from '@splitzip/store';
import { NOT_REPAIRED, putBackBlob, type BlobRepair } from './repair-cached-blob.js';

/**
 * Every build's look at a tensor found already cached (without `--repair`): one stat of its blob
 * (store.checkBlob: an lstat on a directory cache; on s3:// a HEAD, unless the entry's inline copy
 * answers). A blob missing, of another size than its entry's, or not a plain file (a copy of a
 * cache taken while a build wrote into it lacks blobs its journal names) is put back from the
 * tensor's bytes at hand, as `--repair` does: they hash to the entry's content key, the store
 * refuses any payload but the entry's very blob, and writes it atomically under the writer lock.
 * A blob damaged at its right size is left to `--repair`, which reads every blob (a verify's cost).
 * `duringLock` watches the writer lock while the blob is put back.
 */
export async function checkCachedBlob(
  store: CacheStore,
  entry: CacheEntry,
  bytes: Uint8Array,
  duringLock: <T>(task: Promise<T>) => Promise<T>,
): Promise<BlobRepair> {
  try {
    await store.checkBlob(entry.key);
    return NOT_REPAIRED;
  } catch (error) {
    if (!(isStoreError(error) && BLOB_DAMAGE_CODES.has(error.code))) throw error;
    return await duringLock(putBackBlob(store, entry, bytes, error.code === 'BLOB_MISSING' ? 'missing' : 'damaged'));
  }
}
