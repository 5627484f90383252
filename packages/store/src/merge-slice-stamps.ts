import { compareDecimalDigits, fileStampChangeTimeNs } from './file-stamp-change-time.js';
import { MAX_SLICE_STAMPS } from './limits.js';
import { shardStampKind } from './shard-stamp-kind.js';

/** A stamp of a merge and where it stands in it (recording order, oldest first). */
interface PlacedStamp {
  stamp: string;
  at: number;
}

/**
 * Which stamps a binding keeps past MAX_SLICE_STAMPS, best first:
 * - object stamps ahead of file stamps. An object stamp's miss re-reads the tensor from S3 (a file
 *   stamp's, from a local disk); and with file stamps ahead, many files would leave the objects one
 *   slot (the last of their kind), so two objects loaded in turn would push each other out on every
 *   load. With objects ahead, the files share the other slots by the stable rule below.
 * - object stamps by recency of recording (later in the list first): an ETag holds no time. The
 *   list's order is what the journal and manifest record, so replay, compaction and salvage rank
 *   alike. More than 15 objects loaded in turn still push each other out (nothing in the stamp could
 *   rank them stably); real bindings see a handful of object versions.
 * - file stamps by their file's change time, newest first (fileStampChangeTimeNs: ctime, no tool can
 *   set it; a changed or new copy has a newer one), then by the stamp's text. A pure function of the
 *   stamps, like the slice-binding eviction rule (FILE-BINDINGS.md): the same 16 files stay however
 *   often, and in whatever order, the others are loaded. Recording order (the rule through 0.56) made
 *   a 17th file loaded in turn with 16 others push out the next one due: every load missed.
 */
function compareStampRank(a: PlacedStamp, b: PlacedStamp): number {
  const [aObject, bObject] = [shardStampKind(a.stamp) === 'object', shardStampKind(b.stamp) === 'object'];
  if (aObject !== bObject) return aObject ? -1 : 1;
  if (aObject) return b.at - a.at;
  const byTime = compareDecimalDigits(fileStampChangeTimeNs(b.stamp), fileStampChangeTimeNs(a.stamp));
  return byTime !== 0 ? byTime : a.stamp < b.stamp ? -1 : a.stamp > b.stamp ? 1 : 0;
}

/**
 * A binding's stamps after adding `adding` (a copy of the file, an object checked against it): the
 * current ones without those added, then the added ones in their order (recording order). Past
 * MAX_SLICE_STAMPS the best ranked are kept (compareStampRank), in recording order, the added ones
 * competing too: where an added stamp ranks last, it is the one left out, and a merge whose added stamps
 * all rank last keeps the current ones (the caller journals nothing). Never the last of its kind
 * goes: `verify --model` judges a local file by the binding's file stamps, and object stamps (one
 * per ETag a reader checked) would push out every one of them.
 * The result is what the journal operation records; a reader replaying it merges it into the list
 * it has and gets the same list (the kept stamps outrank every one it lacks, however often merged).
 */
export function mergeSliceStamps(current: readonly string[], adding: readonly string[]): readonly string[] {
  const merged = [...current.filter((stamp) => !adding.includes(stamp)), ...adding];
  if (merged.length <= MAX_SLICE_STAMPS) return Object.freeze(merged);
  const ranked = merged.map((stamp, at) => ({ stamp, at })).sort(compareStampRank);
  const kept = new Set<string>();
  // The best of each kind first (never the last of a kind), then the best of the rest.
  for (const kind of ['object', 'file'] as const) {
    const best = ranked.find(({ stamp }) => shardStampKind(stamp) === kind);
    if (best !== undefined) kept.add(best.stamp);
  }
  for (const { stamp } of ranked) {
    if (kept.size >= MAX_SLICE_STAMPS) break;
    kept.add(stamp);
  }
  return Object.freeze(merged.filter((stamp) => kept.has(stamp)));
}

/** Whether a merge left the binding's stamps as they were (every added stamp ranked last): nothing to record. */
export function isSameStampSet(before: readonly string[], after: readonly string[]): boolean {
  return before.length === after.length && after.every((stamp) => before.includes(stamp));
}
