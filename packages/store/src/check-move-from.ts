// AliasSliceItem.moveFrom, checked the same way by both stores.
import { StoreError } from './errors.js';
import type { AliasSliceItem } from './types.js';
import { isContentKey } from './validate-entry.js';

/**
 * The entry an aliasSlices item may move its slice from (undefined: none), or INVALID_ARGUMENT, as
 * for the item's own key. With `rebind` a slice moves from any entry, so the condition is dropped.
 */
export function checkMoveFrom(item: AliasSliceItem, rebind: boolean): string | undefined {
  const { moveFrom } = item;
  if (moveFrom === undefined) return undefined;
  if (!isContentKey(moveFrom)) throw new StoreError('INVALID_ARGUMENT', 'moveFrom must be a content key (40 lower-case hex digits)', { details: { moveFrom } });
  return rebind ? undefined : moveFrom;
}
