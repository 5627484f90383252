import { shardStampKind } from './shard-stamp-kind.js';
import type { SliceBinding } from './types.js';

/**
 * How far a reader may trust a slice binding for the shard it holds:
 * - `trusted`: serve the entry;
 * - `stale`: the binding was verified against other files than this one: serve the tensor raw;
 * - `unchecked`: nothing says either way (an object stamp not recorded yet): the reader checks the
 *   bytes against the entry itself (and may then record the stamp).
 */
export type BindingTrust = 'trusted' | 'stale' | 'unchecked';

/**
 * Classifies a binding against the stamp of the shard a reader holds (`shardStamp`: a file's
 * `<size>:<mtime ns>`, an object's `etag:<ETag>`, null when it has none).
 * - No stamp: trusted, as before stamps existed.
 * - An object stamp is trusted when recorded, else unchecked, never stale: a copy of the same bytes
 *   in another bucket (or written again) has another ETag, so its absence proves nothing.
 * - A file stamp is judged by the binding's file stamps only (object stamps say nothing about local
 *   files): none (a binding from before stamps, or one made from S3) trusted; among them trusted;
 *   else stale.
 */
export function classifyBinding(binding: SliceBinding, shardStamp: string | null): BindingTrust {
  if (shardStamp === null) return 'trusted';
  if (shardStampKind(shardStamp) === 'object') return binding.stamps.includes(shardStamp) ? 'trusted' : 'unchecked';
  const fileStamps = binding.stamps.filter((stamp) => shardStampKind(stamp) === 'file');
  return fileStamps.length === 0 || fileStamps.includes(shardStamp) ? 'trusted' : 'stale';
}
