import { MAX_SLICE_STAMPS } from './limits.js';
import { shardStampKind } from './shard-stamp-kind.js';

/**
 * A binding's stamps after adding `adding` (a copy of the file, an object checked against it): the
 * current ones without those added, then the added ones in their order; past MAX_SLICE_STAMPS the
 * oldest go first, but never the last of its kind: `verify --model` judges a local file by the
 * binding's file stamps (isBindingStale), and object stamps (one per ETag a reader checked) would
 * push out every one of them.
 * The result is what the journal operation records: readers take it as it is (a reader that merges
 * gets the same list: it has MAX_SLICE_STAMPS stamps whenever any were dropped).
 */
export function mergeSliceStamps(current: readonly string[], adding: readonly string[]): readonly string[] {
  const merged = [...current.filter((stamp) => !adding.includes(stamp)), ...adding];
  while (merged.length > MAX_SLICE_STAMPS) {
    const kindCount = (kind: string) => merged.filter((stamp) => shardStampKind(stamp) === kind).length;
    const oldestWithAnother = merged.findIndex((stamp) => kindCount(shardStampKind(stamp)) > 1);
    merged.splice(oldestWithAnother >= 0 ? oldestWithAnother : 0, 1);
  }
  return Object.freeze(merged);
}
