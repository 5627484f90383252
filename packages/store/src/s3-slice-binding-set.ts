// The bindings of each slice of an S3 cache whose cache.json says format 2 (FILE-BINDINGS.md,
// "Phase 2: s3://"): a pure function of one listing of slices/ and stamps/, so that the store's
// view, gc, the drop and unbindSlices all judge alike.
import { MAX_SLICE_BINDINGS, MAX_SLICE_STAMPS } from './limits.js';
import { parseDropIntentObjectName, parseEntryObjectName, parseSliceObjectName, parseStampObjectName } from './s3-layout.js';
import type { SliceKeyTuple } from './types.js';
import { sliceId } from './validate-entry.js';

/**
 * Whether a cache is format 2 for a judgement: known (a boolean), or a look at cache.json to take
 * AFTER the listing it judges (another handle may move the cache meanwhile; the move is PUT before
 * any object of a second binding, so a listing that shows one is followed by a look that shows it).
 */
export type PerFileFormat = boolean | (() => Promise<boolean>);

/** The format of `format` now: the boolean, or the look taken. */
export function isPerFileNow(format: PerFileFormat): Promise<boolean> {
  return typeof format === 'function' ? format() : Promise.resolve(format);
}

/** A listed object: its name (below the prefix) and Last-Modified. */
export interface NamedObject {
  name: string;
  lastModifiedMs: number;
}

/** One binding of a slice: its key, the epoch of its highest alias object, its stamps (oldest first). */
export interface S3Binding {
  key: string;
  epoch: number;
  stamps: string[];
}

/** A slice's alias and stamp objects, judged. */
export interface S3SliceBindings {
  slice: SliceKeyTuple;
  topEpoch: number;
  /** Two or more keys at the top epoch: no primary binding (a conflict, as in format 1). */
  conflictKeys: string[] | undefined;
  /** Latest first: the primary (the top epoch's one key) where there is one, then file bindings by epoch. */
  bindings: S3Binding[];
  /** File bindings past MAX_SLICE_BINDINGS: read as shadowed, their objects deleted by writers and gc. */
  evicted: S3Binding[];
  /** Every alias object of the slice: its name, epoch, key and Last-Modified. */
  aliases: { name: string; epoch: number; key: string; lastModifiedMs: number }[];
  /** Per binding's key, every stamp it holds, also those past MAX_SLICE_STAMPS (gc removes those as superseded). */
  held: Map<string, string[]>;
}

/** Oldest first: by Last-Modified, then by name (S3 times have a second's resolution): how the store's view (both formats) orders a binding's stamps. */
export function compareStampObjects(a: NamedObject, b: NamedObject): number {
  return a.lastModifiedMs - b.lastModifiedMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

/**
 * Per slice id: its bindings under the phase-2 rule. The top epoch's one key is the primary (with
 * every stamp object of its key). Below it, each other key at its highest alias epoch, epoch
 * descending then key ascending, is a file binding holding the stamps of its key that no binding
 * before it (nor a conflict key) holds; a stamp two keys of one epoch hold goes to neither; a key
 * left without a stamp, or that `bindable` refuses (no listed entry of the slice's size), binds
 * nothing. The first MAX_SLICE_BINDINGS are the bindings (the primary counted), the rest evicted.
 */
export function deriveS3SliceBindings(
  aliasObjects: Iterable<NamedObject>,
  stampObjects: Iterable<NamedObject>,
  bindable: (key: string, slice: SliceKeyTuple) => boolean,
): Map<string, S3SliceBindings> {
  const aliasesBySlice = new Map<string, { slice: SliceKeyTuple; aliases: S3SliceBindings['aliases'] }>();
  for (const object of aliasObjects) {
    const parsed = parseSliceObjectName(object.name);
    if (!parsed) continue;
    const id = sliceId(...parsed.slice);
    let at = aliasesBySlice.get(id);
    if (!at) aliasesBySlice.set(id, (at = { slice: parsed.slice, aliases: [] }));
    at.aliases.push({ name: object.name, epoch: parsed.epoch, key: parsed.key, lastModifiedMs: object.lastModifiedMs });
  }
  const stampsBySlice = new Map<string, Map<string, (NamedObject & { stamp: string })[]>>();
  for (const object of stampObjects) {
    const parsed = parseStampObjectName(object.name);
    if (!parsed) continue;
    const id = sliceId(...parsed.slice);
    if (!aliasesBySlice.has(id)) continue;
    let byKey = stampsBySlice.get(id);
    if (!byKey) stampsBySlice.set(id, (byKey = new Map()));
    let list = byKey.get(parsed.key);
    if (!list) byKey.set(parsed.key, (list = []));
    list.push({ name: object.name, lastModifiedMs: object.lastModifiedMs, stamp: parsed.stamp });
  }
  const out = new Map<string, S3SliceBindings>();
  for (const [id, { slice, aliases }] of aliasesBySlice) {
    const byKey = stampsBySlice.get(id) ?? new Map<string, (NamedObject & { stamp: string })[]>();
    const stampsOf = (key: string): string[] => [...(byKey.get(key) ?? [])].sort(compareStampObjects).map((s) => s.stamp);
    const topEpoch = Math.max(...aliases.map((a) => a.epoch));
    const topKeys = [...new Set(aliases.filter((a) => a.epoch === topEpoch).map((a) => a.key))].sort();
    const taken = new Set<string>();
    const bindings: S3Binding[] = [];
    const evicted: S3Binding[] = [];
    for (const key of topKeys) for (const stamp of stampsOf(key)) taken.add(stamp);
    const conflictKeys = topKeys.length > 1 ? topKeys : undefined;
    const held = new Map<string, string[]>();
    if (!conflictKeys) {
      held.set(topKeys[0]!, stampsOf(topKeys[0]!));
      bindings.push({ key: topKeys[0]!, epoch: topEpoch, stamps: stampsOf(topKeys[0]!).slice(-MAX_SLICE_STAMPS) });
    }
    // Each other key at its highest epoch below the top.
    const highest = new Map<string, number>();
    for (const { key, epoch } of aliases) {
      if (topKeys.includes(key)) continue;
      if ((highest.get(key) ?? -1) < epoch) highest.set(key, epoch);
    }
    const byEpoch = new Map<number, string[]>();
    for (const [key, epoch] of highest) {
      let keys = byEpoch.get(epoch);
      if (!keys) byEpoch.set(epoch, (keys = []));
      keys.push(key);
    }
    for (const epoch of [...byEpoch.keys()].sort((a, b) => b - a)) {
      const keys = byEpoch.get(epoch)!.sort();
      const own = new Map(keys.map((key) => [key, stampsOf(key).filter((stamp) => !taken.has(stamp))]));
      const holders = new Map<string, number>();
      for (const stamps of own.values()) for (const stamp of new Set(stamps)) holders.set(stamp, (holders.get(stamp) ?? 0) + 1);
      for (const key of keys) {
        const stamps = own.get(key)!.filter((stamp) => holders.get(stamp) === 1);
        if (stamps.length === 0 || !bindable(key, slice)) continue;
        const binding = { key, epoch, stamps: stamps.slice(-MAX_SLICE_STAMPS) };
        held.set(key, stamps);
        (bindings.length < MAX_SLICE_BINDINGS ? bindings : evicted).push(binding);
      }
      for (const stamps of own.values()) for (const stamp of stamps) taken.add(stamp);
    }
    out.set(id, { slice, topEpoch, conflictKeys, bindings, evicted, aliases, held });
  }
  return out;
}

/**
 * Whether the stamp object `(slice, key, stamp)` is held under the phase-2 rule: its key is a
 * conflict key (either may win its rebind), or a binding that holds the stamp. One a higher binding
 * holds (another key's bytes for that object: rule 2 gives it to the higher one), or of an evicted
 * or unbound key, is an orphan.
 */
export function holdsStampObject(set: S3SliceBindings | undefined, key: string, stamp: string): boolean {
  if (set === undefined) return false;
  if (set.conflictKeys?.includes(key) === true) return true;
  return set.bindings.some((binding) => binding.key === key) && set.held.get(key)?.includes(stamp) === true;
}

/** Every key some slice binds under the phase-2 rule (conflict keys count: either may win its rebind). */
export function boundKeysOfBindingSets(sets: Iterable<S3SliceBindings>): Set<string> {
  const keys = new Set<string>();
  for (const set of sets) {
    for (const key of set.conflictKeys ?? []) keys.add(key);
    for (const binding of set.bindings) keys.add(binding.key);
  }
  return keys;
}

/** Per slice id, the keys bound there under the phase-2 rule (conflict keys count). */
export function boundKeysBySlice(sets: ReadonlyMap<string, S3SliceBindings>): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const [id, set] of sets) out.set(id, boundKeysOfBindingSets([set]));
  return out;
}

/**
 * Every key a listing of slices/ and stamps/ shows bound under the phase-2 rule: the keys to keep.
 * `hasEntry`: the key has an entry object or a drop's intent (the one rule of what binds, for the
 * view, gc, the drop and its resolver alike, so that all cut at MAX_SLICE_BINDINGS at the same
 * binding: a key without either binds nothing and is not counted). Left out: every key.
 */
export function perFileBoundKeys(aliasObjects: Iterable<NamedObject>, stampObjects: Iterable<NamedObject>, hasEntry: (key: string) => boolean = () => true): Set<string> {
  return boundKeysOfBindingSets(deriveS3SliceBindings(aliasObjects, stampObjects, (key) => hasEntry(key)).values());
}

/** The keys of the entry objects and drop intents among `objects` (names below the prefix). */
export function keysWithEntryOrIntent(objects: Iterable<NamedObject>): Set<string> {
  const keys = new Set<string>();
  for (const object of objects) {
    const key = parseEntryObjectName(object.name)?.key ?? parseDropIntentObjectName(object.name)?.key;
    if (key !== undefined) keys.add(key);
  }
  return keys;
}
