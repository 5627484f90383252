import { parseFileStamp } from '@splitzip/safetensors';
import type { CacheEntry } from '@splitzip/store';
import { findBoundSlice } from './check-source-bytes.js';
import { entryDescribesTensor } from './entry-describes-tensor.js';
import type { ShardCache } from './open-shard-cache.js';
import { checkShardUnchanged } from './resolve-tensor-request.js';
import type { ServeTarget } from './serve-tensor.js';

/**
 * Whether `holder`, an entry of another name than `target` that holds its bytes (the content key
 * matched: shape, dtype and bytes), is this model's own: the model's tensor of the entry's name is
 * bound to it, checked against this very file (the binding's stamps hold the shard's stamp now,
 * or this cache handle bound it with that stamp), and the binding was never recorded with another
 * file of that shard name (another inode: another model's or revision's, whose tensor at this
 * slice may hold other bytes). Then `target` duplicates that tensor within this model (per-layer
 * norms of ones sharing one entry named after the first layer, a tied weight), and a build of this
 * model binds its slice to the same entry. Without that evidence (the entry named after another
 * model's tensor that happens to match, or one of a shard name other files share), its unbound
 * slice is left to a build: a bare slice request, which no model checks, follows whatever its
 * slice is bound to (the review of c1e27c5).
 */
export function isHolderThisModelsOwn(cache: ShardCache, target: ServeTarget, holder: CacheEntry): boolean {
  const model = target.model;
  const named = model?.getTensor(holder.qualname);
  if (model === undefined || named === undefined || !entryDescribesTensor(holder, named)) return false;
  const { shardName, offsetBytes, sizeBytes } = named.slice;
  let stamp: string | null | undefined;
  try {
    stamp = shardName === target.slice.shardName ? target.unboundStamp : checkShardUnchanged(model, shardName, named.name);
  } catch {
    return false; // that shard changed under the model: it proves nothing now
  }
  if (stamp === undefined || stamp === null) return false;
  // Found unbound and bound by this handle's load, with this stamp: this file's binding alone.
  if (findBoundSlice(cache.store, shardName, offsetBytes, sizeBytes, stamp) === holder.key) return true;
  const binding = cache.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
  if (binding === undefined || binding.entry.key !== holder.key || !binding.stamps.includes(stamp)) return false;
  const inode = parseFileStamp(stamp)?.inode;
  return binding.stamps.every((other) => other === stamp || (inode !== undefined && parseFileStamp(other)?.inode === inode));
}
