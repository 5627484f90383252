// The commit batcher's answer to each unbindSlice of one merged unbindSlices call, where the store's
// count does not tell which items it removed (another writer moved one meanwhile): an item whose
// slice keeps only bindings it had before (other files' beside it, one binding per file) was removed
// by this call, and counts (unbound_stale); one whose slice is bound to a new entry may have been
// moved, not removed. Before, only a slice left with no binding at all was answered true.
import type { CacheStore, SliceBinding, UnbindSliceItem } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { createCommitBatcher } from '../src/create-commit-batcher.js';

const binding = (key: string): SliceBinding => ({ entry: { key }, stamps: [] }) as unknown as SliceBinding;

describe('unbindSlice answers of one merged call', () => {
  it("true for the slice left with other files' bindings only, false for the one moved to a new entry", async () => {
    // Slice 0: stale key s0 beside another file's o0. Slice 1: stale key s1, moved by another writer to m1 meanwhile.
    const slices = new Map<number, string[]>([
      [0, ['s0', 'o0']],
      [1, ['s1']],
    ]);
    const store = {
      lookupSliceBindings: (_shard: string, offsetBytes: number) => (slices.get(offsetBytes) ?? []).map(binding),
      unbindSlices: async (items: readonly UnbindSliceItem[]) => {
        // Caught up under the lock: the other writer's move of slice 1 comes first.
        slices.set(1, ['m1']);
        let removed = 0;
        for (const item of items) {
          const keys = slices.get(item.offsetBytes)!;
          if (keys.includes(item.key!)) {
            slices.set(item.offsetBytes, keys.filter((key) => key !== item.key));
            removed++;
          }
        }
        return removed;
      },
    } as unknown as CacheStore;
    const commits = createCommitBatcher(store, { rebind: false, batch: false });
    const answers = await Promise.all([
      commits.unbindSlice({ key: 's0', shardName: 'm', offsetBytes: 0, sizeBytes: 2 }),
      commits.unbindSlice({ key: 's1', shardName: 'm', offsetBytes: 1, sizeBytes: 2 }),
    ]);
    expect(answers).toEqual([true, false]);
  });
});
