import type { CacheEntry } from '@splitzip/store';

const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((value, i) => value === b[i]);

/**
 * Whether `entry` can hold this tensor's bytes at all: BF16 both, one size, one shape (its content
 * key covers the shape). A trusted binding to an entry that cannot is a damaged cache
 * (CACHE_ENTRY_MISMATCH); an unchecked one is another model's tensor at the slice (stale, unhashed).
 */
export function entryDescribesTensor(entry: CacheEntry, tensor: { dtype: string; shape: readonly number[]; slice: { sizeBytes: number } }): boolean {
  return entry.dtype === 'BF16' && tensor.dtype === 'BF16' && entry.rawBytes === tensor.slice.sizeBytes && sameShape(entry.shape, tensor.shape);
}
