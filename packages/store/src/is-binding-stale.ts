import { shardStampKind } from './shard-stamp-kind.js';
import type { SliceBinding } from './types.js';

/**
 * Whether a slice binding was recorded against other local files than the one a reader holds
 * (`fileStamp`, its SafetensorsShard.stamp): the binding has file stamps, and not this one (the
 * file was changed, copied, or is another model's). What `splitzip verify --model` reports as
 * stale; a loader does not stop there (classifyBinding: 'unchecked', so it checks the bytes).
 * A binding without file stamps, or a reader without a stamp or with an object stamp, is not stale.
 */
export function isBindingStale(binding: SliceBinding, fileStamp: string | null): boolean {
  if (fileStamp === null || shardStampKind(fileStamp) !== 'file') return false;
  const fileStamps = binding.stamps.filter((stamp) => shardStampKind(stamp) === 'file');
  return fileStamps.length > 0 && !fileStamps.includes(fileStamp);
}
