// Removing one slice binding of an S3 cache (S3CacheStore.unbindSlices): its alias objects and the
// stamp objects of the keys they bound. No lock on S3, so the order and the looks before each
// DELETE are what keep it safe beside writers (README "S3 layout", unbindSlices).
import { sameSecond, type S3Transport, type ListedObject } from './s3-transport.js';
import { parseSliceObjectName, parseStampObjectName, sliceDirName, stampDirName } from './s3-layout.js';
import { deriveS3SliceBindings, type S3SliceBindings } from './s3-slice-binding-set.js';
import type { SliceKeyTuple } from './types.js';
import type { CheckedUnbind } from './unbind-slices.js';
import { sliceId } from './validate-entry.js';

/**
 * Deletes listed objects, each looked at just before every DELETE attempt: gone already, or
 * written again since it was listed (another writer made that alias or stamp again: it is theirs
 * now), it is left. Resolves whether every one of them is gone.
 */
export async function deleteListed(transport: S3Transport, objects: readonly { name: string; lastModifiedMs: number }[]): Promise<boolean> {
  const outcomes = await Promise.all(
    objects.map(async (object) => {
      let kept = false;
      await transport.deleteObject(object.name, async () => {
        const head = await transport.headObject(object.name);
        kept = head !== undefined && !sameSecond(head.lastModifiedMs, object.lastModifiedMs);
        return head !== undefined && !kept;
      });
      return !kept;
    }),
  );
  return outcomes.every(Boolean);
}

/**
 * Removes the bindings of `item.slice` an unbind item names: lists the slice's alias and stamp
 * objects, THEN asks `isPerFile` whether cache.json says format 2 (FILE-BINDINGS.md, "Phase 2"),
 * and removes by that rule: removeS3FileBindings, else removeS3SliceBinding. The move to format 2
 * is PUT before any object of a second binding, so a listing that shows one is followed by an
 * answer of format 2; asked before the listing, a move landing between the two was judged by the
 * format-1 rule (a keyed unbind of the latest deleted every alias below it: other files'
 * bindings). `isPerFile` throws where cache.json cannot be read: neither default is safe (format 1
 * deletes other files' bindings; format 2 on a format-1 cache brings a shadowed alias back as the
 * latest). Resolves how many bindings it removed.
 */
export async function removeS3Bindings(
  transport: S3Transport,
  item: CheckedUnbind,
  isPerFile: () => Promise<boolean>,
  bindable: (key: string, slice: SliceKeyTuple) => boolean,
): Promise<number> {
  const [aliasObjects, stampObjects] = await Promise.all([transport.list(sliceDirName(item.slice)), transport.list(stampDirName(item.slice))]);
  if (await isPerFile()) return removeS3FileBindings(transport, item, aliasObjects, stampObjects, bindable);
  return (await removeS3SliceBinding(transport, item, aliasObjects, stampObjects)) ? 1 : 0;
}

/**
 * Removes the binding of `item.slice` (only while its top epoch binds `item.key`, where given):
 * the alias objects below the slice's top epoch first, then those at it, so that a reader never
 * sees an older epoch's key come back as the binding; then the stamp objects of the keys the top
 * epoch held, as listed before the first DELETE (a stamp object of a key no alias binds is gc's
 * orphan anyway). An alias object written again since the listing is left, and with it the
 * binding. Resolves whether this call removed it: false when the slice is bound again by then.
 * Known gap: a slice in conflict (two keys at its top epoch) resolves to the key whose object goes
 * last for the moment between the two DELETEs.
 */
async function removeS3SliceBinding(transport: S3Transport, item: CheckedUnbind, aliasObjects: readonly ListedObject[], stampObjects: readonly ListedObject[]): Promise<boolean> {
  const aliases: { object: ListedObject; epoch: number; key: string }[] = [];
  for (const object of aliasObjects) {
    const parsed = parseSliceObjectName(object.name);
    if (parsed) aliases.push({ object, epoch: parsed.epoch, key: parsed.key });
  }
  if (aliases.length === 0) return false;
  const top = Math.max(...aliases.map((a) => a.epoch));
  const topAliases = aliases.filter((a) => a.epoch === top);
  const topKeys = new Set(topAliases.map((a) => a.key));
  // Bound to that key alone (a conflict binds nothing): else not the binding the caller judged.
  if (item.key !== undefined && (topKeys.size !== 1 || !topKeys.has(item.key))) return false;
  // The stamps were listed before any alias goes: a writer that binds the slice again once its alias
  // objects are gone writes a new stamp object, which a listing made after would take (the binding
  // then stood with no stamps, and every reader hashed it again).
  const stamps = stampObjects.filter((object) => {
    const parsed = parseStampObjectName(object.name);
    return parsed !== undefined && topKeys.has(parsed.key);
  });
  if (!(await deleteListed(transport, aliases.filter((a) => a.epoch < top).map((a) => a.object)))) return false;
  if (!(await deleteListed(transport, topAliases.map((a) => a.object)))) return false;
  await deleteListed(transport, stamps);
  // Bound again meanwhile (another writer's alias after the DELETEs): not this call's removal.
  return !(await transport.list(sliceDirName(item.slice))).some((object) => parseSliceObjectName(object.name) !== undefined);
}

/**
 * removeS3SliceBinding for a format-2 cache (FILE-BINDINGS.md, "Phase 2: s3://"), whose slice may
 * hold several bindings (deriveS3SliceBindings; `bindable`: the key has a listed entry of the
 * slice's size). With `item.key`: that binding only. A file binding (below the top epoch): its
 * alias objects, then its stamp objects of the slice. The latest (the top epoch's): first the
 * aliases below the top that bind nothing (shadowed or evicted), lowest first, so that none comes
 * back as the latest; then its own, lowest first; then its stamps: the next file binding becomes
 * the latest. Without `key`: every alias object (lower epochs first), then the stamp objects of
 * every key bound. Resolves how many bindings it removed (0 where one was written again since the
 * listing, or `key` binds nothing there).
 */
async function removeS3FileBindings(
  transport: S3Transport,
  item: CheckedUnbind,
  aliasObjects: readonly ListedObject[],
  stampObjects: readonly ListedObject[],
  bindable: (key: string, slice: SliceKeyTuple) => boolean,
): Promise<number> {
  const set = deriveS3SliceBindings(aliasObjects, stampObjects, bindable).get(sliceId(...item.slice));
  if (set === undefined) return 0;
  const byName = new Map(aliasObjects.map((object) => [object.name, object]));
  const lowestFirst = (aliases: S3SliceBindings['aliases']): ListedObject[] => [...aliases].sort((a, b) => a.epoch - b.epoch).map((a) => byName.get(a.name)!);
  const stampsOf = (keys: ReadonlySet<string>): ListedObject[] =>
    stampObjects.filter((object) => {
      const parsed = parseStampObjectName(object.name);
      return parsed !== undefined && keys.has(parsed.key);
    });
  if (item.key === undefined) {
    const keys = new Set([...set.bindings.map((b) => b.key), ...(set.conflictKeys ?? [])]);
    const stamps = stampsOf(keys);
    if (!(await deleteListed(transport, lowestFirst(set.aliases.filter((a) => a.epoch < set.topEpoch))))) return 0;
    if (!(await deleteListed(transport, lowestFirst(set.aliases.filter((a) => a.epoch === set.topEpoch))))) return 0;
    await deleteListed(transport, stamps);
    return Math.max(set.bindings.length, set.conflictKeys ? 1 : 0);
  }
  const at = set.bindings.findIndex((binding) => binding.key === item.key);
  if (at < 0) return 0;
  const keys = new Set([item.key]);
  const stamps = stampsOf(keys);
  if (at === 0) {
    const bound = new Set(set.bindings.map((b) => b.key));
    if (!(await deleteListed(transport, lowestFirst(set.aliases.filter((a) => a.epoch < set.topEpoch && !bound.has(a.key)))))) return 0;
  }
  if (!(await deleteListed(transport, lowestFirst(set.aliases.filter((a) => a.key === item.key))))) return 0;
  await deleteListed(transport, stamps);
  return 1;
}
