import { accessSync, constants } from 'node:fs';
import type { ShardCache } from './open-shard-cache.js';

/** Per local cache handle: why this process cannot write its directory (an errno code), or null when it can. One access(2), at first need. */
const unwritableByCache = new WeakMap<ShardCache, string | null>();

/**
 * Why this process cannot write the local cache `cache` (an errno code: EACCES for another user's
 * directory, EROFS for a read-only mount, even as root); undefined when it can, and for an s3://
 * cache (whose permissions only a write would tell). Asked once per handle.
 */
export function findUnwritableReason(cache: ShardCache): string | undefined {
  if (cache.remote) return undefined;
  let reason = unwritableByCache.get(cache);
  if (reason === undefined) {
    try {
      accessSync(cache.root, constants.W_OK);
      reason = null;
    } catch (error) {
      reason = typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'not writable';
    }
    unwritableByCache.set(cache, reason);
  }
  return reason ?? undefined;
}

/**
 * A remedy that a build writes into the cache (a binding, `--rebind`, `--repair`) as a report says
 * it: as it is, unless this process cannot write the local cache, where it cannot happen as said
 * (a read-only mount shipped beside a model, another user's directory): then where it can.
 */
export function describeBuildRemedy(cache: ShardCache | undefined, remedy: string): string {
  const unwritable = cache === undefined ? undefined : findUnwritableReason(cache);
  if (unwritable === undefined) return remedy;
  return `${remedy} where the cache can be written: this process cannot write this one (${unwritable}), so build with write access to it, or into a writable copy of it`;
}
