import { parseFileStamp } from '@splitzip/safetensors';
import { shardStampKind } from './shard-stamp-kind.js';
import type { SliceBinding } from './types.js';

/**
 * Whether a slice binding was recorded against other local files than the one a reader holds
 * (`fileStamp`, its SafetensorsShard.stamp): the binding has file stamps, and not this one (the
 * file was changed, copied, or is another model's). What `splitzip verify --model` reports as
 * stale; a loader does not stop there (classifyBinding: 'unchecked', so it checks the bytes).
 * A binding without file stamps, or a reader without a stamp or with an object stamp, is not stale.
 * A legacy stamp (`<size>:<mtime ns>`, before 2026-12-05) equal to the file's size and mtime counts
 * as this file's: it may be (verify compares the bytes anyway), and an upgraded reader would
 * otherwise call every binding of an older cache stale.
 */
export function isBindingStale(binding: SliceBinding, fileStamp: string | null): boolean {
  if (fileStamp === null || shardStampKind(fileStamp) !== 'file') return false;
  const fileStamps = binding.stamps.filter((stamp) => shardStampKind(stamp) === 'file');
  if (fileStamps.length === 0 || fileStamps.includes(fileStamp)) return false;
  const now = parseFileStamp(fileStamp);
  return !fileStamps.some((stamp) => {
    const recorded = parseFileStamp(stamp);
    return recorded !== undefined && recorded.ctimeNs === undefined && recorded.size === now?.size && recorded.mtimeNs === now.mtimeNs;
  });
}
