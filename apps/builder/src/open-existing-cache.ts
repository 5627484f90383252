import { isS3Url, isStoreError, openCacheStore, type CacheStore } from '@splitzip/store';
import { BuilderError } from './errors.js';
import { describeHolder, isHolderGone, readLockHolder } from './read-lock-holder.js';

/**
 * Opens a cache that must exist (verify, inspect, gc). A directory with no manifest.json yet whose
 * lock file names a writer that is running is a cache being created (a build between taking the
 * lock and writing its first manifest, or stopped there): CACHE_BEING_CREATED naming that writer,
 * where the store's NOT_A_CACHE said to run a build, which the writer is.
 */
export async function openExistingCache(cache: string, options: { signal: AbortSignal; command: string }): Promise<CacheStore> {
  try {
    // The signal ends a directory cache's waits for the writer lock, an s3:// cache's requests (Ctrl-C).
    return await openCacheStore(cache, { create: false, signal: options.signal, s3: { signal: options.signal } });
  } catch (error) {
    if (!isStoreError(error, 'NOT_A_CACHE') || isS3Url(cache)) throw error;
    const holder = await readLockHolder(cache);
    if (holder === undefined || isHolderGone(holder)) throw error;
    throw new BuilderError(
      'CACHE_BEING_CREATED',
      `a cache is being created at ${cache} by ${describeHolder(holder)}: it holds the cache's writer lock and has not written manifest.json yet (a build starting, or stopped); run ${options.command} again once it has`,
      { file: cache, holder },
      { cause: error },
    );
  }
}
