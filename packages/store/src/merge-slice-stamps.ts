import { compareDecimalDigits, fileStampChangeTimeNs } from './file-stamp-change-time.js';
import { MAX_OBJECT_STAMPS_AHEAD, MAX_SLICE_STAMPS } from './limits.js';
import { shardStampKind } from './shard-stamp-kind.js';

/** A stamp of a merge, where it stands in it (recording order, oldest first), and its tier (rankStamps). */
interface PlacedStamp {
  stamp: string;
  at: number;
  tier: 0 | 1 | 2;
}

/**
 * Which stamps a binding keeps past MAX_SLICE_STAMPS, best first, in three tiers:
 * 0. the MAX_OBJECT_STAMPS_AHEAD object stamps recorded most recently (later in the list first): an
 *    object stamp's miss re-reads the tensor from S3 (a file stamp's, from a local disk); and with
 *    file stamps ahead, many files would leave the objects one slot (the last of their kind), so two
 *    objects loaded in turn would push each other out on every load. An ETag holds no time: the
 *    list's order is what the journal and manifest record, so replay, compaction and salvage rank
 *    alike.
 * 1. file stamps by their file's change time, newest first (fileStampChangeTimeNs: ctime, no tool
 *    can set it; a changed or new copy has a newer one), then by the stamp's text. A pure function of
 *    the stamps, like the slice-binding eviction rule (FILE-BINDINGS.md): the same files stay however
 *    often, and in whatever order, the others are loaded. Recording order (the rule through 0.56)
 *    made a 17th file loaded in turn with 16 others push out the next one due: every load missed.
 * 2. the older object stamps, most recently recorded first: versions read once and never again
 *    (nothing ages an ETag out) go before any file, so they cannot pin the slots for good.
 * Ranked by use of neither kind: a file changed long ago (a base model sharing frozen tensors with
 * 16 later checkpoints) ranks last however often it is loaded.
 */
function rankStamps(merged: readonly string[]): PlacedStamp[] {
  const objects = merged.filter((stamp) => shardStampKind(stamp) === 'object');
  const ahead = new Set(objects.slice(-MAX_OBJECT_STAMPS_AHEAD));
  const placed = merged.map((stamp, at): PlacedStamp => ({ stamp, at, tier: ahead.has(stamp) ? 0 : shardStampKind(stamp) === 'object' ? 2 : 1 }));
  return placed.sort(compareStampRank);
}

function compareStampRank(a: PlacedStamp, b: PlacedStamp): number {
  if (a.tier !== b.tier) return a.tier - b.tier;
  if (a.tier !== 1) return b.at - a.at;
  const byTime = compareDecimalDigits(fileStampChangeTimeNs(b.stamp), fileStampChangeTimeNs(a.stamp));
  return byTime !== 0 ? byTime : a.stamp < b.stamp ? -1 : a.stamp > b.stamp ? 1 : 0;
}

/**
 * A binding's stamps after adding `adding` (a copy of the file, an object checked against it): the
 * current ones without those added, then the added ones in their order (recording order). Past
 * MAX_SLICE_STAMPS the best ranked are kept (rankStamps), in recording order, the added ones
 * competing too: where an added stamp ranks last, it is the one left out, and a merge whose added stamps
 * all rank last keeps the current ones (the caller journals nothing). Never the last of its kind
 * goes: `verify --model` judges a local file by the binding's file stamps, and object stamps (one
 * per ETag a reader checked) would push out every one of them.
 * The result is what the journal operation records; a reader replaying it merges it into the list
 * it had before the operation and gets the same list: the kept stamps outrank every one it lacks
 * (those go after them in its merge, and a dropped object stamp implies MAX_OBJECT_STAMPS_AHEAD kept
 * newer ones). Among writers of this rule: a 0.56 writer's list, merged here, may keep another
 * (equally valid) set, which costs only a check of the bytes again.
 */
export function mergeSliceStamps(current: readonly string[], adding: readonly string[]): readonly string[] {
  const merged = [...current.filter((stamp) => !adding.includes(stamp)), ...adding];
  if (merged.length <= MAX_SLICE_STAMPS) return Object.freeze(merged);
  const ranked = rankStamps(merged);
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
