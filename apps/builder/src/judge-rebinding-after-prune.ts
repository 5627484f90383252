// What another revision's or model's next load can do for the bindings of other files a prune removes
// (`gc --model --prune-other-files`). Where the prune leaves the slice unbound, its load binds the
// slice again by content key; where another binding stays there (this model's), only beside it, and
// a load binds beside another file's binding only while the cache holds a second binding of some
// slice (the runtime: a load never moves a cache to manifest format 3, which releases before 0.56
// refuse). A prune that removes the last second binding leaves such tensors `stale` until a build.
import type { CacheStore } from '@splitzip/store';
import type { PrunedBinding } from './judge-model-bindings.js';

export interface RebindingAfterPrune {
  /** Of the pruned bindings recorded with other files (`otherFile`), those whose slice keeps another binding once the prune ran. */
  otherFilesBeside: number;
  /** Whether some slice of the cache holds a second binding once the prune ran (the store's holdsSeveralBindings, as this judges it). */
  secondBindingHeld: boolean;
}

const sliceId = (shardName: string, offsetBytes: number, sizeBytes: number): string => JSON.stringify([shardName, offsetBytes, sizeBytes]);

/**
 * Judges, from `store` before the prune, what removing `prune` leaves. A scan of every binding only
 * where the store holds a second binding now (the prune only removes: else none after either).
 */
export function judgeRebindingAfterPrune(store: CacheStore, prune: readonly PrunedBinding[]): RebindingAfterPrune {
  const pruned = new Map<string, number>();
  for (const { shardName, offsetBytes, sizeBytes } of prune) {
    const id = sliceId(shardName, offsetBytes, sizeBytes);
    pruned.set(id, (pruned.get(id) ?? 0) + 1);
  }
  const left = (shardName: string, offsetBytes: number, sizeBytes: number): number =>
    store.lookupSliceBindings(shardName, offsetBytes, sizeBytes).length - (pruned.get(sliceId(shardName, offsetBytes, sizeBytes)) ?? 0);
  let otherFilesBeside = 0;
  for (const binding of prune) if (binding.otherFile && left(binding.shardName, binding.offsetBytes, binding.sizeBytes) > 0) otherFilesBeside += 1;
  return { otherFilesBeside, secondBindingHeld: store.holdsSeveralBindings && holdsSecondAfter(store, left) };
}

function holdsSecondAfter(store: CacheStore, left: (shardName: string, offsetBytes: number, sizeBytes: number) => number): boolean {
  for (const entry of store.entries()) {
    for (const [shardName, offsetBytes, sizeBytes] of entry.sliceKeys) if (left(shardName, offsetBytes, sizeBytes) >= 2) return true;
  }
  return false;
}
