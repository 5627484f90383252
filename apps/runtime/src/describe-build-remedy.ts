import { accessSync, constants, lstatSync } from 'node:fs';
import { join } from 'node:path';
import type { ShardCache } from './open-shard-cache.js';

/** Per local cache handle: why this process cannot write its directory (an errno code), or null when it can. One access(2), at first need. */
const unwritableByCache = new WeakMap<ShardCache, string | null>();

/**
 * Why this process cannot write the local cache `cache` (an errno code: EACCES for another user's
 * directory, EROFS for a read-only mount, even as root; or its blobs/ being a link, which every
 * writer of the store refuses, UNSAFE_BLOB_PATH); undefined when it can, and for an s3:// cache
 * (whose permissions only a write would tell). Asked once per handle.
 */
export function findUnwritableReason(cache: ShardCache): string | undefined {
  if (cache.remote) return undefined;
  let reason = unwritableByCache.get(cache);
  if (reason === undefined) {
    try {
      accessSync(cache.root, constants.W_OK);
      reason = describeForeignBlobsDirectory(cache.root);
    } catch (error) {
      reason = typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'not writable';
    }
    unwritableByCache.set(cache, reason);
  }
  return reason ?? undefined;
}

const FOREIGN_BLOBS_LINK = 'its blobs/ is a symbolic link, which the store writes nothing through: UNSAFE_BLOB_PATH';
const FOREIGN_BLOBS_FILE = 'its blobs is not a directory: UNSAFE_BLOB_PATH';

/**
 * What makes an unwritable cache writable, for `reason` (findUnwritableReason's): write access, or
 * for a blobs/ that is not the cache's own, the store's remedy (a build refuses it too, and a copy
 * of the cache keeps the link).
 */
export function describeWritableRemedy(reason: string): string {
  if (reason === FOREIGN_BLOBS_LINK) return 'link the whole cache directory instead of its blobs/, or copy the blobs into a blobs/ of its own';
  if (reason === FOREIGN_BLOBS_FILE) return 'move that file aside and run `splitzip build <model> --out <cache> --repair`';
  return 'with write access to it, or into a writable copy of it';
}

/**
 * The store's writers refuse a cache whose blobs/ is not its own directory (a link: another cache's,
 * or one on another disk): a load's stamp or binding record failed there while its report said it
 * was being recorded (review, 2026-12-07). Null for a directory, or none yet.
 */
function describeForeignBlobsDirectory(root: string): string | null {
  try {
    const stats = lstatSync(join(root, 'blobs'));
    if (stats.isSymbolicLink()) return FOREIGN_BLOBS_LINK;
    return stats.isDirectory() ? null : FOREIGN_BLOBS_FILE;
  } catch {
    return null;
  }
}

/**
 * A remedy that a build writes into the cache (a binding, `--rebind`, `--repair`) as a report says
 * it: as it is, unless this process cannot write the local cache, where it cannot happen as said
 * (a read-only mount shipped beside a model, another user's directory): then where it can.
 */
export function describeBuildRemedy(cache: ShardCache | undefined, remedy: string): string {
  const unwritable = cache === undefined ? undefined : findUnwritableReason(cache);
  if (unwritable === undefined) return remedy;
  const fix = describeWritableRemedy(unwritable);
  return `${remedy} where the cache can be written: this process cannot write this one (${unwritable}), so ${fix.startsWith('with ') ? `build ${fix}` : fix}`;
}
