import { realpath } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { DEFAULT_CHUNK_SIZE } from '@splitzip/codec';
import { FsCacheStore, type CacheStore } from './cache-store.js';
import { checkOpenOptions } from './check-options.js';
import { StoreError } from './errors.js';
import { FsBackend } from './fs-backend.js';
import { encodeJournalHeader } from './journal-format.js';
import { DEFAULT_LOCK_TIMEOUT_MS, MAX_REFRESH_INTERVAL_MS } from './limits.js';
import { isValidChunkSize, isValidCoverage, serializeManifest } from './manifest-format.js';
import { markCacheBeingCreated } from './mark-cache-being-created.js';
import { isS3Url, looksLikeOtherUrl, parseS3Url } from './s3-layout.js';
import { S3CacheStore } from './s3-cache-store.js';
import { S3Transport, type ResolvedS3Settings } from './s3-transport.js';
import type { OpenCacheStoreOptions, S3StoreOptions } from './types.js';

/** The seed's coverage gate. */
export const DEFAULT_COVERAGE_MIN = 0.99;

function positiveInteger(value: number | undefined, fallback: number, name: string, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) throw new StoreError('INVALID_ARGUMENT', `s3.${name} must be an integer ≥ ${min}`, { details: { [name]: value } });
  return value;
}

/**
 * Longest one S3 request attempt may take, start to end (default of S3StoreOptions.requestDeadlineMs):
 * a part is at most 2 × 8 MiB (reads) or 64 MiB (multipart uploads), minutes even at 1 MB/s.
 */
export const DEFAULT_REQUEST_DEADLINE_MS = 300_000;

export function resolveS3Settings(options: S3StoreOptions): ResolvedS3Settings {
  return {
    maxConcurrentRequests: positiveInteger(options.maxConcurrentRequests, 8, 'maxConcurrentRequests'),
    partSizeBytes: positiveInteger(options.partSizeBytes, 8 * 2 ** 20, 'partSizeBytes', 64 * 1024),
    multipartThresholdBytes: positiveInteger(options.multipartThresholdBytes, 64 * 2 ** 20, 'multipartThresholdBytes', 5 * 2 ** 20),
    maxAttempts: positiveInteger(options.maxAttempts, 6, 'maxAttempts'),
    retryBaseDelayMs: positiveInteger(options.retryBaseDelayMs, 100, 'retryBaseDelayMs', 0),
    retryMaxDelayMs: positiveInteger(options.retryMaxDelayMs, 2000, 'retryMaxDelayMs', 0),
    requestDeadlineMs: positiveInteger(options.requestDeadlineMs, DEFAULT_REQUEST_DEADLINE_MS, 'requestDeadlineMs', 1),
  };
}

/**
 * Opens the cache at `root`: a directory, or `s3://bucket/prefix` (the S3 layout of the README;
 * settings in `options.s3`, endpoint and credentials from the AWS SDK environment variables). With `create: true` a missing cache is created (an empty
 * generation-1 manifest and journal, under the writer lock); otherwise a missing manifest is NOT_A_CACHE
 * (`details.reason` 'being-created', naming the holder, where a live writer holds the lock: creating it).
 */
export async function openCacheStore(root: string, options: OpenCacheStoreOptions = {}): Promise<CacheStore> {
  if (typeof root !== 'string' || root.length === 0) throw new StoreError('INVALID_ARGUMENT', 'root must be a directory path');
  checkOpenOptions(options);
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const coverageMin = options.coverageMin ?? DEFAULT_COVERAGE_MIN;
  if (!isValidChunkSize(chunkSize)) throw new StoreError('INVALID_ARGUMENT', 'chunkSize must be a power of two in 64..65536', { details: { chunkSize } });
  if (!isValidCoverage(coverageMin)) throw new StoreError('INVALID_ARGUMENT', 'coverageMin must be a number in 0..1', { details: { coverageMin } });
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  if (!Number.isFinite(lockTimeoutMs) || lockTimeoutMs < 0) {
    throw new StoreError('INVALID_ARGUMENT', 'lockTimeoutMs must be a non-negative number', { details: { lockTimeoutMs } });
  }
  const compactOnClose = options.compactOnClose ?? true;
  if (compactOnClose !== true && compactOnClose !== false && compactOnClose !== 'when-due') {
    throw new StoreError('INVALID_ARGUMENT', "compactOnClose must be true, false or 'when-due'", { details: { compactOnClose: String(compactOnClose) } });
  }
  const refreshIntervalMs = options.refreshIntervalMs;
  if (refreshIntervalMs !== undefined && !(Number.isFinite(refreshIntervalMs) && refreshIntervalMs > 0 && refreshIntervalMs <= MAX_REFRESH_INTERVAL_MS)) {
    throw new StoreError('INVALID_ARGUMENT', `refreshIntervalMs must be a positive number of milliseconds up to MAX_REFRESH_INTERVAL_MS (${MAX_REFRESH_INTERVAL_MS}, Node's timer limit)`, {
      details: { refreshIntervalMs, limit: MAX_REFRESH_INTERVAL_MS },
    });
  }
  if (looksLikeOtherUrl(root)) {
    throw new StoreError('INVALID_ARGUMENT', `${JSON.stringify(root)} looks like a URL, but object stores are s3://bucket/prefix (lower case, two slashes); a local directory of that name is refused`, {
      path: root,
    });
  }
  if (isS3Url(root)) {
    const location = parseS3Url(root);
    const s3 = options.s3 ?? {};
    const settings = resolveS3Settings(s3);
    const transport = new S3Transport(s3, location, settings);
    try {
      return await S3CacheStore.open(
        transport,
        { refreshIntervalMs, readThroughDir: s3.readThroughDir, sliceBindingsPerFile: options.sliceBindingsPerFile === true },
        options.create ? { chunkSize, coverageMin, createBucket: s3.createBucket === true } : undefined,
      );
    } catch (error) {
      transport.destroy();
      throw error;
    }
  }
  let backend = new FsBackend(resolve(root));
  if (options.create && !(await backend.readManifest())) {
    // The lock first, blobs/ after: a reader that finds the directory then finds who is creating it
    // (markCacheBeingCreated), where a bare blobs/ read as no cache at all.
    await backend.ensureRoot();
    const lock = await backend.acquireWriteLock(lockTimeoutMs, options.signal);
    try {
      await backend.ensureLayout();
      // Another process may have created it while we waited for the lock.
      if (!(await backend.readManifest())) {
        await backend.createJournal(1, encodeJournalHeader(1));
        await backend.writeManifest(serializeManifest([], { generation: 1, chunkSize, coverageMin }));
      }
    } finally {
      await lock.release();
    }
  }
  // Pinned to the directory `root` names now, symlinks resolved: a release-style swap of a link to
  // the cache (`mv -T current.tmp current`) needs a reopen. Unpinned, a refresh read the new cache's
  // manifest beside the old one's blobs directory (resolved at the first blob read): BLOB_MISSING
  // naming files that exist. A root that cannot be resolved is left as it is: the load says why.
  const pinned = await realpath(backend.root).catch(() => undefined);
  if (pinned !== undefined && pinned !== backend.root) backend = new FsBackend(pinned);
  const load = (): Promise<CacheStore> => FsCacheStore.load(backend, { lockTimeoutMs, signal: options.signal, refreshIntervalMs, compactOnClose, sliceBindingsPerFile: options.sliceBindingsPerFile === true });
  try {
    return await load();
  } catch (error) {
    // No manifest yet under a live writer's lock: a cache being created, said as such.
    const marked = await markCacheBeingCreated(error, backend.describe('lock'));
    // Its creator may have written manifest.json and let the lock go between the load's manifest
    // read and the lock read (no lock then): the cache exists now, and NOT_A_CACHE's "open with
    // create: true" would be wrong. Read the manifest again and, if it is there, open once more.
    if (isMissingManifest(error, backend) && (await backend.readManifest().catch(() => undefined)) !== undefined) {
      try {
        return await load();
      } catch (again) {
        throw await markCacheBeingCreated(again, backend.describe('lock'));
      }
    }
    throw marked;
  }
}

/** The load's NOT_A_CACHE for a missing manifest.json of this directory (not a path that is a file). */
function isMissingManifest(error: unknown, backend: FsBackend): boolean {
  return error instanceof StoreError && error.code === 'NOT_A_CACHE' && error.path === join(backend.root, 'manifest.json');
}
