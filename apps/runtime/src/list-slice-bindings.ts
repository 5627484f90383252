import type { SliceBinding } from '@splitzip/store';
import type { ShardCache } from './open-shard-cache.js';

/**
 * Every binding of a slice, latest first: a local cache keeps one per file of a slice (revisions of
 * a model side by side, FILE-BINDINGS.md), an s3:// one per object in a format-2 cache.json. A caller's cache without lookupSliceBindings
 * holds one at most: its lookupSliceBinding's.
 */
export function listSliceBindings(cache: ShardCache, shardName: string, offsetBytes: number, sizeBytes: number): readonly SliceBinding[] {
  if (typeof cache.lookupSliceBindings === 'function') return cache.lookupSliceBindings(shardName, offsetBytes, sizeBytes);
  const one = cache.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
  return one === undefined ? [] : [one];
}
