// Whether a cache holds a slice bound for more than one file: what takes a directory cache to
// manifest format 3 / journal version 2, which releases before 0.56 refuse (UNSUPPORTED_FORMAT).
// The store writes that format exactly while this holds (packages/store README, One binding per file).
import type { CacheStore } from '@splitzip/store';

/** One pass over the entries' slice keys (no file read): stops at the first slice with a second binding. */
export function holdsSecondBindings(store: CacheStore): boolean {
  for (const entry of store.entries()) {
    for (const [shardName, offsetBytes, sizeBytes] of entry.sliceKeys) {
      if (store.lookupSliceBindings(shardName, offsetBytes, sizeBytes).length > 1) return true;
    }
  }
  return false;
}
