// How much a commit's ops add to the manifest a compaction writes, so that an add or alias that
// would take it above MAX_MANIFEST_BYTES is refused before it is journalled (a manifest that size
// is refused by every reader, so the compaction that would write it refuses too). An upper bound:
// the journal's own bytes (MessagePack) under-counted the JSON they become (escaped strings, long
// numbers), so adds were journalled that no compaction could fold.
import type { StoreOp } from './store-state.js';
import type { SliceKeyTuple } from './types.js';
import { entryToDisk } from './validate-entry.js';

/**
 * The manifest bytes `ops` add, at most: an added entry's JSON text with its key, colon and comma
 * (exact), an alias's or rebind's slice tuple with its comma (exact for the tuple; a rebind or a
 * stamp update also takes one away). Added entries are rare next to their blob writes, so the one
 * JSON.stringify each costs nothing worth saving.
 */
export function estimateManifestGrowthBytes(ops: readonly StoreOp[]): number {
  let bytes = 0;
  for (const op of ops) {
    if (op.kind === 'add') bytes += jsonStringBytes(op.key) + Buffer.byteLength(JSON.stringify(entryToDisk(op.entry))) + 2; // `:` and a comma
    else if (op.kind === 'alias' || op.kind === 'rebind') bytes += sliceTupleBytes(op.slice);
  }
  return bytes;
}

/** A slice tuple's text in an entry's `slice_keys` (`["name",offset,size]` or `[…,["stamp",…]]`), with its comma. */
export function sliceTupleBytes(slice: SliceKeyTuple): number {
  // Brackets, two commas inside and one after: 5.
  let bytes = jsonStringBytes(slice[0]) + String(slice[1]).length + String(slice[2]).length + 5;
  const stamps = slice[3];
  if (stamps !== undefined) {
    bytes += 3 + Math.max(0, stamps.length - 1); // `,[` `]` and the commas between stamps
    for (const stamp of stamps) bytes += jsonStringBytes(stamp);
  }
  return bytes;
}

/** Printable ASCII but the quote and the backslash: JSON text is the string quoted (nearly every shard name; no copy made). */
const PLAIN_JSON_TEXT = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A string's bytes as JSON text: quoted, escaped (a control character takes up to 6), in UTF-8. */
function jsonStringBytes(text: string): number {
  return PLAIN_JSON_TEXT.test(text) ? text.length + 2 : Buffer.byteLength(JSON.stringify(text));
}
