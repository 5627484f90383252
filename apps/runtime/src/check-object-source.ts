import { computeContentKey, isStoreError, type AliasSliceItem, type CacheEntry, type CacheStore } from '@splitzip/store';
import { describeError } from './errors.js';
import type { ShardCache } from './open-shard-cache.js';
import type { ServeTarget } from './serve-tensor.js';
import type { TensorReport } from './types.js';

/**
 * A binding not yet checked against its shard's object (an s3:// model's shard, stamped by its
 * ETag): the tensor was read raw into `data`. Its content key is computed; when it is the entry's,
 * the object's stamp is recorded with the binding, so later loads of this object are served from
 * the cache; when it is not, the object holds other bytes (another model's of the same layout) and
 * the tensor stays raw (`stale`). Never throws: a failed record only leaves the binding unchecked.
 */
export async function checkObjectSource(
  cache: ShardCache,
  target: ServeTarget,
  unchecked: { entry: CacheEntry; stamp: string },
  data: Uint8Array,
  report: TensorReport,
): Promise<void> {
  const { entry, stamp } = unchecked;
  const { shardName, offsetBytes, sizeBytes } = target.slice;
  const startMs = performance.now();
  const key = computeContentKey(data, target.shape, 'BF16');
  report.digestMs += performance.now() - startMs;
  report.key = entry.key;
  if (key !== entry.key) {
    report.reason = 'stale';
    report.detail = `shard object ${shardName} (${stamp}) holds other bytes than the entry its slice is bound to (another model's object of this name and layout?): served raw`;
    return;
  }
  report.reason = 'unchecked';
  try {
    const recorded = await recordObjectStamp(cache.store, { key: entry.key, shardName, offsetBytes, sizeBytes, stamp });
    report.detail = recorded
      ? `shard object ${shardName} (${stamp}) checked: its bytes are the entry's; recorded with the binding (later loads come from the cache)`
      : `shard object ${shardName} (${stamp}) checked: its bytes are the entry's, but the binding was gone when recording it`;
  } catch (error) {
    const { code, message } = describeError(error);
    const said = message.startsWith(`${code}: `) ? message : `${code}: ${message}`;
    report.detail = `shard object ${shardName} (${stamp}) checked: its bytes are the entry's, but recording that failed (${said}); the next load checks it again`;
  }
}

interface PendingRecords {
  items: AliasSliceItem[];
  /** Item index by slice, key and stamp: concurrent loads of one tensor record it once. */
  atById: Map<string, number>;
  settle: { resolve: (bound: boolean) => void; reject: (error: unknown) => void; at: number }[];
}

/** Records waiting for the next flush, per store: one aliasSlices call (one commit, or one S3 round) for a whole load's checks. */
const pendingByStore = new WeakMap<CacheStore, PendingRecords>();

function recordObjectStamp(store: CacheStore, item: AliasSliceItem & { stamp: string }): Promise<boolean> {
  let pending = pendingByStore.get(store);
  if (pending === undefined) {
    const batch: PendingRecords = { items: [], atById: new Map(), settle: [] };
    pending = batch;
    pendingByStore.set(store, batch);
    // Checks finishing within one turn of the event loop share a commit.
    setImmediate(() => {
      pendingByStore.delete(store);
      void flushRecords(store, batch);
    });
  }
  const id = JSON.stringify([item.key, item.shardName, item.offsetBytes, item.sizeBytes, item.stamp]);
  let at = pending.atById.get(id);
  if (at === undefined) {
    at = pending.items.push(item) - 1;
    pending.atById.set(id, at);
  }
  const batch = pending;
  const itemAt = at;
  return new Promise((resolve, reject) => batch.settle.push({ resolve, reject, at: itemAt }));
}

/**
 * One aliasSlices call for the batch. A batch the store refuses as a whole for one item (a stamp
 * too long for an S3 object key; a slice another process rebound since the check: the store
 * persists nothing of a batch with a conflict) is recorded item by item, so that one item's
 * refusal is its own and not every tensor's of the load.
 */
async function flushRecords(store: CacheStore, batch: PendingRecords): Promise<void> {
  let results: boolean[];
  try {
    results = await store.aliasSlices(batch.items);
  } catch (error) {
    if (batch.items.length === 1 || !(isStoreError(error, 'INVALID_ARGUMENT') || isStoreError(error, 'SLICE_CONFLICT'))) {
      for (const { reject } of batch.settle) reject(error);
      return;
    }
    const outcomes = await Promise.allSettled(batch.items.map((item) => store.aliasSlices([item])));
    for (const { resolve, reject, at } of batch.settle) {
      const outcome = outcomes[at]!;
      if (outcome.status === 'fulfilled') resolve(outcome.value[0] === true);
      else reject(outcome.reason);
    }
    return;
  }
  for (const { resolve, at } of batch.settle) resolve(results[at] === true);
}
