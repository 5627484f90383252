import { StoreError } from './errors.js';

/**
 * A batch call's items as an array of objects, else INVALID_ARGUMENT naming the first bad one:
 * `map` skips the holes of a sparse array (`new Array(1)` came back as `[<hole>]`, nothing done and
 * nothing said) and `item.shardName` of a null is a bare TypeError.
 */
export function checkCallItems(items: unknown, method: string, shape: string): void {
  if (!Array.isArray(items)) throw new StoreError('INVALID_ARGUMENT', `${method} takes an array`);
  for (let i = 0; i < items.length; i++) {
    const item: unknown = items[i];
    if (item === null || typeof item !== 'object') {
      throw new StoreError('INVALID_ARGUMENT', `${method} item ${i} must be ${shape}, not ${item === null ? 'null' : typeof item}`, { details: { index: i } });
    }
  }
}
