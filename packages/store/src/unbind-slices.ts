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
 * and key, so each binding is removed, and counted, once.
 */
export function checkUnbindItems(items: readonly UnbindSliceItem[]): CheckedUnbind[] {
  checkCallItems(items, 'unbindSlices', 'an UnbindSliceItem object ({ shardName, offsetBytes, sizeBytes, key? })');
  checkItemFields(items, 'unbindSlices');
  const seen = new Set<string>();
  const checked: CheckedUnbind[] = [];
  for (const item of items) {
    const slice = validateSliceKey([item.shardName, item.offsetBytes, item.sizeBytes], undefined, 'INVALID_ARGUMENT');
    if (item.key !== undefined && !isContentKey(item.key)) throw new StoreError('INVALID_ARGUMENT', 'key must be 40 lower-case hex digits', { details: { key: item.key } });
    // One binding per file: items naming two entries of one slice remove both.
    const id = `${sliceId(...slice)}\0${item.key ?? ''}`;
    if (seen.has(id)) continue;
    seen.add(id);
    checked.push({ slice, key: item.key });
  }
  return checked;
}

/** The entries of the bindings `item` removes: its `key`'s where the slice is bound to it, else (no `key`) every binding's. */
function keysToUnbind(state: StoreState, item: CheckedUnbind): string[] {
  const keys = state.bindingsOf(item.slice).map((binding) => binding.key);
  return item.key === undefined ? keys : keys.filter((key) => key === item.key);
}

/** Whether `item`'s slice is bound in `state`, to its `key` where it names one. */
export function isUnbindable(state: StoreState, item: CheckedUnbind): boolean {
  return keysToUnbind(state, item).length > 0;
}

/**
 * `state` without the bindings of `items` (its `key`'s binding where it names one, else every binding of the slice): every
 * entry stays, only the slice keys of those bindings go. Undefined when none of them is bound.
 * The state it returns is new; `state` is not changed (the caller swaps it in once it is durable).
 */
export function planUnbind(state: StoreState, items: readonly CheckedUnbind[]): { state: StoreState; removed: number } | undefined {
  const gone = new Map<string, Set<string>>();
  for (const item of items) {
    for (const owner of keysToUnbind(state, item)) {
      let ids = gone.get(owner);
      if (!ids) gone.set(owner, (ids = new Set()));
      ids.add(sliceId(...item.slice));
    }
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
  // Fewer bindings of a slice that held several still keep the rule (StoreState.fromEntries).
  return { state: StoreState.fromEntries(entries, { source: 'unbindSlices' }, state.bindingLevel), removed };
}
