import { resolve } from 'node:path';
import { DEFAULT_CHUNK_SIZE } from '@splitzip/codec';
import { FsCacheStore, type CacheStore } from './cache-store.js';
import { StoreError } from './errors.js';
import { FsBackend } from './fs-backend.js';
import { encodeJournalHeader } from './journal-format.js';
import { DEFAULT_LOCK_TIMEOUT_MS } from './limits.js';
import { isValidChunkSize, isValidCoverage, serializeManifest } from './manifest-format.js';
import type { OpenCacheStoreOptions } from './types.js';

/** The seed's coverage gate. */
export const DEFAULT_COVERAGE_MIN = 0.99;

/**
 * Opens the cache at `root` (a directory). With `create: true` a missing cache is created (an empty
 * generation-1 manifest and journal, under the writer lock); otherwise a missing manifest is NOT_A_CACHE.
 */
export async function openCacheStore(root: string, options: OpenCacheStoreOptions = {}): Promise<CacheStore> {
  if (typeof root !== 'string' || root.length === 0) throw new StoreError('INVALID_ARGUMENT', 'root must be a directory path');
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const coverageMin = options.coverageMin ?? DEFAULT_COVERAGE_MIN;
  if (!isValidChunkSize(chunkSize)) throw new StoreError('INVALID_ARGUMENT', 'chunkSize must be a power of two in 64..65536', { details: { chunkSize } });
  if (!isValidCoverage(coverageMin)) throw new StoreError('INVALID_ARGUMENT', 'coverageMin must be a number in 0..1', { details: { coverageMin } });
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  if (!Number.isFinite(lockTimeoutMs) || lockTimeoutMs < 0) {
    throw new StoreError('INVALID_ARGUMENT', 'lockTimeoutMs must be a non-negative number', { details: { lockTimeoutMs } });
  }
  const refreshIntervalMs = options.refreshIntervalMs;
  if (refreshIntervalMs !== undefined && !(Number.isFinite(refreshIntervalMs) && refreshIntervalMs > 0)) {
    throw new StoreError('INVALID_ARGUMENT', 'refreshIntervalMs must be a positive number', { details: { refreshIntervalMs } });
  }
  const backend = new FsBackend(resolve(root));
  if (options.create && !(await backend.readManifest())) {
    await backend.ensureLayout();
    const lock = await backend.acquireWriteLock(lockTimeoutMs);
    try {
      // Another process may have created it while we waited for the lock.
      if (!(await backend.readManifest())) {
        await backend.createJournal(1, encodeJournalHeader(1));
        await backend.writeManifest(serializeManifest([], { generation: 1, chunkSize, coverageMin }));
      }
    } finally {
      await lock.release();
    }
  }
  return FsCacheStore.load(backend, {
    lockTimeoutMs,
    refreshIntervalMs,
    compactOnClose: options.compactOnClose ?? true,
  });
}
