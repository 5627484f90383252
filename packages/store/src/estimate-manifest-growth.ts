// How much a commit's ops add to the manifest a compaction writes, so that an add or alias that
// would take it above MAX_MANIFEST_BYTES is refused before it is journalled (a manifest that size
// is refused by every reader, so the compaction that would write it refuses too).
import type { StoreOp } from './store-state.js';
import type { SliceKeyTuple } from './types.js';
import { entryToDisk } from './validate-entry.js';

/**
 * The manifest bytes `ops` add: an added entry's JSON text with its key (exact), an alias's slice
 * tuple (an upper bound: a rebind or a stamp update also takes one away). Added entries are rare
 * next to their blob writes, so the one JSON.stringify each costs nothing worth saving.
 */
export function estimateManifestGrowthBytes(ops: readonly StoreOp[]): number {
  let bytes = 0;
  for (const op of ops) {
    if (op.kind === 'add') bytes += Buffer.byteLength(JSON.stringify(entryToDisk(op.entry))) + op.key.length + 4; // `"key":` and a comma
    else if (op.kind === 'alias' || op.kind === 'rebind') bytes += sliceTupleBytes(op.slice);
  }
  return bytes;
}

/** A slice tuple's text in an entry's `slice_keys`, with its comma. */
function sliceTupleBytes(slice: SliceKeyTuple): number {
  let bytes = Buffer.byteLength(slice[0]) + 32; // quotes, brackets, commas and two numbers of up to 16 digits
  for (const stamp of slice[3] ?? []) bytes += Buffer.byteLength(stamp) + 3;
  return bytes;
}
