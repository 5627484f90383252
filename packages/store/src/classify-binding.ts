import type { SliceBinding } from './types.js';

/**
 * How far a reader may trust a slice binding for the shard it holds:
 * - `trusted`: serve the entry;
 * - `unchecked`: the binding has no record of this shard's stamp: the reader checks the bytes
 *   against the entry itself (and may then record the stamp, so that later reads are trusted).
 */
export type BindingTrust = 'trusted' | 'unchecked';

/**
 * Classifies a binding against the stamp of the shard a reader holds (`shardStamp`: a file's
 * `<size>:<mtime ns>:<ctime ns>:<inode>`, an object's `etag:<ETag>`, null when it has none).
 * - No stamp: trusted, as before stamps existed.
 * - A stamp the binding recorded (its build read that file, or a reader checked it): trusted.
 * - Any other: unchecked. Neither kind proves the bytes differ (a copy of the same bytes has other
 *   file times, or another ETag), and neither kind may be taken as a match by default: a binding
 *   without file stamps (made from an object, before stamps, or in an s3:// cache, whose bindings
 *   hold no file stamps of their own) says nothing about a local file of that name, which may be
 *   another model's of the same layout (a fine-tune).
 */
export function classifyBinding(binding: SliceBinding, shardStamp: string | null): BindingTrust {
  if (shardStamp === null || binding.stamps.includes(shardStamp)) return 'trusted';
  return 'unchecked';
}
