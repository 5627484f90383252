// Removing slice bindings (CacheStore.unbindSlices): the arguments' checks, shared by both stores,
// and the local store's plan, a state without those bindings that a compaction writes.
import { checkItemFields } from './check-options.js';
import { checkCallItems } from './check-call-items.js';
import { StoreError } from './errors.js';
import { StoreState } from './store-state.js';
import type { SliceKeyTuple, UnbindSliceItem } from './types.js';
import { isContentKey, sliceId, validateSliceKey, withSliceKeys } from './validate-entry.js';

/** An UnbindSliceItem checked: its slice key (no stamps), and the entry it must still be bound to. */
export interface CheckedUnbind {
  slice: SliceKeyTuple;
  key: string | undefined;
}

/**
 * Checks unbindSlices' items (INVALID_ARGUMENT, as for aliasSlices) and drops repeats of a slice
 * (the first one's `key` counts), so each binding is removed, and counted, once.
 */
export function checkUnbindItems(items: readonly UnbindSliceItem[]): CheckedUnbind[] {
  checkCallItems(items, 'unbindSlices', 'an UnbindSliceItem object ({ shardName, offsetBytes, sizeBytes, key? })');
  checkItemFields(items, 'unbindSlices');
  const seen = new Set<string>();
  const checked: CheckedUnbind[] = [];
  for (const item of items) {
    const slice = validateSliceKey([item.shardName, item.offsetBytes, item.sizeBytes], undefined, 'INVALID_ARGUMENT');
    if (item.key !== undefined && !isContentKey(item.key)) throw new StoreError('INVALID_ARGUMENT', 'key must be 40 lower-case hex digits', { details: { key: item.key } });
    const id = sliceId(...slice);
    if (seen.has(id)) continue;
    seen.add(id);
    checked.push({ slice, key: item.key });
  }
  return checked;
}

/** Whether `item`'s slice is bound in `state`, to its `key` where it names one. */
export function isUnbindable(state: StoreState, item: CheckedUnbind): boolean {
  const owner = state.ownerOf(item.slice);
  return owner !== undefined && (item.key === undefined || owner === item.key);
}

/**
 * `state` without the bindings of `items` (each bound, to its `key` where it names one): every
 * entry stays, only the slice keys of those bindings go. Undefined when none of them is bound.
 * The state it returns is new; `state` is not changed (the caller swaps it in once it is durable).
 */
export function planUnbind(state: StoreState, items: readonly CheckedUnbind[]): { state: StoreState; removed: number } | undefined {
  const gone = new Map<string, Set<string>>();
  for (const item of items) {
    if (!isUnbindable(state, item)) continue;
    const owner = state.ownerOf(item.slice)!;
    let ids = gone.get(owner);
    if (!ids) gone.set(owner, (ids = new Set()));
    ids.add(sliceId(...item.slice));
  }
  if (gone.size === 0) return undefined;
  let removed = 0;
  const entries = Array.from(state.entries.values(), (entry) => {
    const ids = gone.get(entry.key);
    if (!ids) return entry;
    const kept = entry.sliceKeys.filter((slice) => !ids.has(sliceId(...slice)));
    removed += entry.sliceKeys.length - kept.length;
    return withSliceKeys(entry, kept);
  });
  return { state: StoreState.fromEntries(entries, { source: 'unbindSlices' }), removed };
}
