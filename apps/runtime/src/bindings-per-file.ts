import type { CacheStore } from '@splitzip/store';

/**
 * Stores openShardCache opened with sliceBindingsPerFile (the store does not say): their records
 * bind a file's slice beside other files' bindings, where a store without it answers such an alias
 * `false`. A caller's store (wrapCacheStore) is not in it: loads through it keep the one-binding rules.
 */
const storesWithBindingsPerFile = new WeakSet<CacheStore>();

/** Marks `store` as opened with one binding per file (a cache openShardCache opened: a directory, or s3:// for object stamps). */
export function markBindingsPerFile(store: CacheStore): void {
  storesWithBindingsPerFile.add(store);
}

/** Whether `store` was opened by openShardCache with one binding per file. */
export function keepsBindingsPerFile(store: CacheStore): boolean {
  return storesWithBindingsPerFile.has(store);
}
