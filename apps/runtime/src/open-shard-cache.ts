import { join } from 'node:path';
import { openCacheStore, type CacheEntry, type CacheStore } from '@splitzip/store';
import { createStagingPool, type StagingPool, type StagingSlot } from './create-staging-pool.js';
import { RuntimeError } from './errors.js';

/** The seed's coverage gate, used when the manifest does not say which gate its builder used. */
export const DEFAULT_COVERAGE_MIN = 0.99;

/**
 * A cache handle for loaders: the store's lookup, alias and blob-read operations (the store's own
 * functions, bound — not re-implemented), plus what the runtime needs around them. Safe to share
 * across concurrent calls: lookups are synchronous over the store's copy-on-write maps, blob reads
 * are independent, and the store queues and group-commits concurrent aliases itself.
 */
export interface ShardCache {
  readonly root: string;
  /** The underlying store, for anything not re-exported here. */
  readonly store: CacheStore;
  /** Coverage gate of the build (the manifest's `coverage_min`), used to explain misses. */
  readonly coverageMin: number;
  lookup(bytes: Uint8Array, shape: readonly number[], dtype: string): CacheEntry | undefined;
  lookupBySlice(shardName: string, offsetBytes: number, sizeBytes: number): CacheEntry | undefined;
  getEntry(key: string): CacheEntry | undefined;
  aliasSlice(
    keyOrBytes: string | { bytes: Uint8Array; shape: readonly number[]; dtype: string },
    shardName: string,
    offsetBytes: number,
    sizeBytes: number,
  ): Promise<boolean>;
  /** Reads and verifies a payload into a staging slot (a pool slot or any Uint8Array); returns the payload view. */
  readBlob(key: string, stagingSlot: StagingSlot | Uint8Array): Promise<Uint8Array>;
  /** Picks up entries and aliases other processes committed since the last refresh. */
  refresh(): Promise<void>;
  /** Absolute path of an entry's blob file (the store validated the relative path when it loaded the entry). */
  blobPath(entry: CacheEntry): string;
  /** The largest compressed payload among `entries` (default: all entries), in bytes. */
  largestPayloadBytes(entries?: Iterable<CacheEntry>): number;
  /** A staging pool whose slots hold the largest payload of the cache (or of `entries`). */
  createStagingPool(options?: { slotCount?: number; entries?: Iterable<CacheEntry>; shared?: boolean }): StagingPool;
  close(): Promise<void>;
}

export interface OpenShardCacheOptions {
  /** Coverage gate to explain misses against (default: the manifest's `coverage_min`). */
  coverageMin?: number;
  /** Passed to the store: refresh from other processes on a timer. */
  refreshIntervalMs?: number;
}

/** Opens a built cache for loading. A directory without a manifest is a `CACHE_OPEN_FAILED` error. */
export async function openShardCache(root: string, options: OpenShardCacheOptions = {}): Promise<ShardCache> {
  let store: CacheStore;
  try {
    const storeOptions: Parameters<typeof openCacheStore>[1] = { create: false };
    if (options.refreshIntervalMs !== undefined) Object.assign(storeOptions, { refreshIntervalMs: options.refreshIntervalMs });
    store = await openCacheStore(root, storeOptions);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new RuntimeError('CACHE_OPEN_FAILED', `cannot open the shard cache at ${root}: ${(error as Error).message}`, {
      root,
      storeCode: code,
    }, { cause: error });
  }
  return wrapCacheStore(store, options);
}

/** Wraps an already-open store (a builder that just wrote it, a test) as a runtime cache handle. */
export function wrapCacheStore(store: CacheStore, options: { coverageMin?: number } = {}): ShardCache {
  const coverageMin = options.coverageMin ?? (store.coverageMin > 0 ? store.coverageMin : DEFAULT_COVERAGE_MIN);
  const largestPayloadBytes = (entries: Iterable<CacheEntry> = store.entries()) => {
    let largest = 0;
    for (const entry of entries) if (entry.compBytes > largest) largest = entry.compBytes;
    return largest;
  };
  return {
    root: store.root,
    store,
    coverageMin,
    lookup: (bytes, shape, dtype) => store.lookup(bytes, shape, dtype),
    lookupBySlice: (shardName, offsetBytes, sizeBytes) => store.lookupBySlice(shardName, offsetBytes, sizeBytes),
    getEntry: (key) => store.getEntry(key),
    aliasSlice: (keyOrBytes, shardName, offsetBytes, sizeBytes) => store.aliasSlice(keyOrBytes, shardName, offsetBytes, sizeBytes),
    readBlob: (key, stagingSlot) => store.readBlob(key, stagingSlot instanceof Uint8Array ? stagingSlot : stagingSlot.bytes),
    refresh: () => store.refresh(),
    blobPath: (entry) => join(store.root, entry.blob),
    largestPayloadBytes,
    createStagingPool(poolOptions = {}) {
      const slotCount = poolOptions.slotCount ?? 4;
      if (!Number.isSafeInteger(slotCount) || slotCount < 1) {
        throw new RuntimeError('INVALID_ARGUMENT', 'slotCount must be a positive integer', { slotCount });
      }
      return createStagingPool({
        slotBytes: largestPayloadBytes(poolOptions.entries),
        slotCount,
        shared: poolOptions.shared ?? false,
      });
    },
    close: () => store.close(),
  };
}
