// A cacheOnly miss of a tensor too small to shrink (describeNoGain by its size) in a cache that holds
// entries of its size: a default build cached such tensors, so its entry may be there with its slice
// unbound (`splitzip gc --model` of another model or revision of the same shard names removes such
// bindings). Not `no-gain`: that says no build without --skip-no-gain was made, and verify --model
// calls the same tensor "in the cache by content key, but its slice not bound".
import { describeBuildRemedy } from './describe-build-remedy.js';
import { entryDescribesTensor } from './entry-describes-tensor.js';
import type { ShardCache } from './open-shard-cache.js';
import type { ServeTarget } from './serve-tensor.js';

/**
 * The `missing` detail of such a tensor. An entry of its own name and shape is named (one scan of
 * the entries, on this failing path only): only its raw bytes, hashed, can tell that it is this
 * tensor's, which a cacheOnly load never reads, so it is not served unchecked.
 */
export function describeUnboundNoGain(target: ServeTarget, cache: ShardCache, noGain: string): string {
  let own: string | undefined;
  for (const entry of cache.store.entries()) {
    if (entry.qualname === target.name && entryDescribesTensor(entry, target)) {
      own = entry.key;
      break;
    }
  }
  const held = own === undefined ? 'the cache holds entries of its size, which a build without --skip-no-gain makes' : `the cache holds entry ${own} of its name and shape`;
  const bind = describeBuildRemedy(cache, `a load without cacheOnly reads it raw, looks it up by content key and binds the slice to its entry (served from the cache afterwards), as a build of this model does`);
  return `no entry is bound to this slice: it ${noGain}, but ${held}; the slice's binding may have been removed (\`splitzip gc --model\` of another model or revision of these shard names) or the cache built from other shard names or offsets: only its raw bytes tell, and a cacheOnly load reads none: ${bind}`;
}
