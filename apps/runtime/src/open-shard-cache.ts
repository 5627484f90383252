import { describeValue } from '@splitzip/codec/internal';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isS3Url, isStoreError, openCacheStore, type CacheEntry, type CacheStore, type ReadBlobOptions, type SliceBinding, type OpenedBlob, type S3StoreOptions } from '@splitzip/store';
import { checkSlotCountArgument, checkSlotWaitArgument, createStagingPool, isStagingSlotReleased, maxSlotCountFor, MAX_SLOT_BYTES, type StagingPool, type StagingSlot } from './create-staging-pool.js';
import { describeError, isRetryableError, RuntimeError } from './errors.js';
import { argumentError, checkBooleanArgument, checkCoverageArgument, checkOptionsArgument, checkRefreshIntervalArgument, checkS3Arguments, checkSourcePolicyArgument, optionNames } from './check-load-arguments.js';
import { flushObjectStamps, type ObjectStampStats } from './check-source-bytes.js';
export type { ObjectStampStats };
import { markBindingsPerFile } from './bindings-per-file.js';
import { keepIdleStagingPool, takeIdleStagingPool } from './idle-staging-pools.js';

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
  /** True for an `s3://` cache: blobs come through the store's ranged GETs (a custom `reader` does not apply to them). */
  readonly remote: boolean;
  /** The underlying store, for anything not re-exported here. */
  readonly store: CacheStore;
  /** Coverage gate of the build (the manifest's `coverage_min`), used to explain misses. */
  readonly coverageMin: number;
  /** OpenShardCacheOptions.objectSources (undefined: 'check'). */
  readonly objectSources?: ObjectSourcePolicy | undefined;
  /** OpenShardCacheOptions.fileSources (undefined: 'check'). */
  readonly fileSources?: ObjectSourcePolicy | undefined;
  lookup(bytes: Uint8Array, shape: readonly number[], dtype: string): CacheEntry | undefined;
  lookupBySlice(shardName: string, offsetBytes: number, sizeBytes: number): CacheEntry | undefined;
  /**
   * The slice's entry and the shard stamps recorded with the binding (the store's; SliceKeyTuple).
   * `stamp` (the reader's shard stamp): of a slice with several bindings (one per file, a local
   * cache's revisions side by side), the one whose stamps hold it, else the latest.
   */
  lookupSliceBinding(shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string): SliceBinding | undefined;
  /**
   * Every binding of the slice, latest first (the store's lookupSliceBindings: up to
   * MAX_SLICE_BINDINGS on a local cache, one or none on s3://). Optional for caches a caller wraps
   * itself: the runtime then takes lookupSliceBinding's one.
   */
  lookupSliceBindings?(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[];
  getEntry(key: string): CacheEntry | undefined;
  /** `stamp`: the shard's SafetensorsShard.stamp, recorded with the binding so that loads of a changed file do not trust it. */
  aliasSlice(
    keyOrBytes: string | { bytes: Uint8Array; shape: readonly number[]; dtype: string },
    shardName: string,
    offsetBytes: number,
    sizeBytes: number,
    stamp?: string,
  ): Promise<boolean>;
  /**
   * The store's checkBlob: the entry's blob is there with its size (BLOB_MISSING, BLOB_SIZE_MISMATCH
   * otherwise), without reading it. Optional for caches a caller wraps itself; loads then skip the check.
   */
  checkBlob?(key: string): Promise<void>;
  /** Reads and verifies a payload into a staging slot (a pool slot or any Uint8Array); returns the payload view. */
  readBlob(key: string, stagingSlot: StagingSlot | Uint8Array, options?: ReadBlobOptions): Promise<Uint8Array>;
  /** The store's readBlobSync (local caches only; undefined for object stores). */
  readonly readBlobSync: ((key: string, stagingSlot: StagingSlot | Uint8Array, options?: ReadBlobOptions) => Uint8Array) | undefined;
  /** The store's openBlobSync (local caches only): the blob opened for a read on a decode thread. */
  readonly openBlobSync: ((key: string, stagingSlot: Uint8Array) => OpenedBlob) | undefined;
  /**
   * Drops this host's read-through copy of a blob whose checksum the caller found wrong after a
   * `readBlob(..., { verifyChecksum: false })` (no-op for stores without local copies).
   */
  discardLocalCopy(key: string): Promise<void>;
  /** Picks up entries and aliases other processes committed since the last refresh. */
  refresh(): Promise<void>;
  /** Absolute path (or `s3://` URL of the object) of an entry's blob (the store validated the relative path when it loaded the entry). */
  blobPath(entry: CacheEntry): string;
  /** The largest compressed payload among `entries` (default: all entries) that a staging slot can hold (MAX_SLOT_BYTES), in bytes. */
  largestPayloadBytes(entries?: Iterable<CacheEntry>): number;
  /** A staging pool whose slots hold the largest payload of the cache (or of `entries`). */
  createStagingPool(options?: { slotCount?: number; entries?: Iterable<CacheEntry>; shared?: boolean; slotWaitMs?: number }): StagingPool;
  /**
   * Lends a pool with at least `slotCount` slots (at most as many as MAX_STAGING_POOL_BYTES holds:
   * at least one) of at least `slotBytes` (loadModel's default): an
   * idle pool an earlier load gave back (through any handle of this process) when one fits, else a
   * new one. `giveBack()` returns it for the next load, so repeated loads reuse the same slots. At
   * most `MAX_IDLE_POOLS` idle pools are kept, for `IDLE_POOL_RELEASE_MS` after the last
   * use (`releaseIdleStagingPools()` drops them at once).
   */
  borrowStagingPool(request: { slotBytes: number; slotCount: number; shared?: boolean; threads?: number }): { pool: StagingPool; giveBack(): void };
  /**
   * Waits for the stamps (of objects and of local files) that loads through this handle queued
   * (the runtime records them with their bindings in the background: see
   * OpenShardCacheOptions.objectSources and fileSources) and says what they came to. close() waits
   * for them too. Optional for caches a caller wraps itself.
   */
  flushObjectStamps?(): Promise<ObjectStampStats>;
  close(): Promise<void>;
}

/**
 * How a binding is used for a shard whose stamp it has no record of (classifyBinding: 'unchecked'):
 * an object (an s3:// model's, stamped `etag:<etag>`), or a local file (`<size>:<mtime ns>:<ctime ns>:<inode>`: a copy
 * of the model, a file touched since the build, another model's of the same layout, or any local
 * file against an s3:// cache, whose bindings hold no file stamps of their own). `check` reads the
 * tensor raw once, hashes it, and records the stamp with the binding when its bytes are the
 * entry's (later loads come from the cache; through this handle even when the record fails), or
 * serves it raw (`stale`) when they are not;
 * `trust` serves the cached bytes unchecked where the binding has no record of that kind of shard
 * (for a cache only ever used with the model it was built from; or a `cacheOnly` loader, which
 * never reads raw, so never checks), but still checks a file the binding was recorded against
 * other files of (a model rewritten in place, which was `stale` before checks existed).
 */
export type ObjectSourcePolicy = 'check' | 'trust';

export interface OpenShardCacheOptions {
  /** Bindings not yet checked against an object shard (default 'check'): see ObjectSourcePolicy. */
  objectSources?: ObjectSourcePolicy | undefined;
  /**
   * Bindings not yet checked against a local shard file (default 'check'): see ObjectSourcePolicy.
   * An s3:// cache records a checked file's stamp on this host only: in `readThroughDir` (every
   * process of the host then trusts it), else in this handle (each process checks once).
   */
  fileSources?: ObjectSourcePolicy | undefined;
  /** Coverage gate to explain misses against (default: the manifest's `coverage_min`). */
  coverageMin?: number | undefined;
  /** Passed to the store: refresh from other processes on a timer. */
  refreshIntervalMs?: number | undefined;
  /**
   * `s3://` caches: a per-host directory of fetched blobs (verified by checksum on every read) and
   * of the stamps of this host's local shard files checked against the cache (trusted as a local
   * cache's journal would be: keep it private to the host's loaders); same as `s3.readThroughDir`.
   */
  readThroughDir?: string | undefined;
  /** `s3://` caches: the store's S3 settings (endpoint, retries, concurrency, part size…); credentials come from the AWS environment. */
  s3?: S3StoreOptions | undefined;
}

const OPEN_SHARD_CACHE_OPTIONS = optionNames<OpenShardCacheOptions>({
  objectSources: true,
  fileSources: true,
  coverageMin: true,
  refreshIntervalMs: true,
  readThroughDir: true,
  s3: true,
});
const WRAP_CACHE_STORE_OPTIONS = optionNames<Parameters<typeof wrapCacheStore>[1] & object>({ coverageMin: true, objectSources: true, fileSources: true });
const CACHE_POOL_OPTIONS = optionNames<NonNullable<Parameters<ShardCache['createStagingPool']>[0]>>({ slotCount: true, entries: true, shared: true, slotWaitMs: true });
const BORROW_POOL_OPTIONS = optionNames<Parameters<ShardCache['borrowStagingPool']>[0]>({ slotBytes: true, slotCount: true, shared: true, threads: true });

/**
 * Opens a built cache for loading: a directory, or `s3://bucket/prefix` (delegated to the store's
 * `openCacheStore`, with `s3` and `readThroughDir`). No cache there is `CACHE_OPEN_FAILED`; an object
 * store that stays unreachable, or a directory cache a live (not stopped) writer is creating, is
 * `CACHE_UNAVAILABLE` (retryable).
 */
export async function openShardCache(root: string, options: OpenShardCacheOptions = {}): Promise<ShardCache> {
  if (typeof root !== 'string' || root.length === 0) {
    const got = describeValue(root);
    throw new RuntimeError('INVALID_ARGUMENT', `a cache location is a directory path or an s3:// URL, got ${got}`, { option: 'root', got });
  }
  checkOptionsArgument(options, OPEN_SHARD_CACHE_OPTIONS);
  checkCoverageArgument(options.coverageMin);
  checkSourcePolicyArgument(options.objectSources, 'objectSources');
  checkSourcePolicyArgument(options.fileSources, 'fileSources');
  checkRefreshIntervalArgument(options.refreshIntervalMs);
  checkS3Arguments(options, 'openShardCache');
  let store: CacheStore;
  try {
    // A loader writes little (the bindings and file stamps it learns): its close folds the journal
    // into the manifest only once that is worth a rewrite of the whole manifest (1.3 s and 150 MB
    // at 64,000 entries, on every close of a process that bound one slice).
    const storeOptions: Parameters<typeof openCacheStore>[1] = { create: false, compactOnClose: 'when-due' };
    // One binding per file of a slice (FILE-BINDINGS.md): the stamps and bindings a load records
    // for its file go beside other revisions' bindings, never moving them. On s3:// (phase 2) only
    // object stamps (ETags) bind beside, only in a cache.json already format 2 (every record carries
    // besideOnlyIfSeveral); a local file's stamps stay on this host (readThroughDir), one binding per slice.
    storeOptions.sliceBindingsPerFile = true;
    if (options.refreshIntervalMs !== undefined) Object.assign(storeOptions, { refreshIntervalMs: options.refreshIntervalMs });
    if (options.s3 !== undefined || options.readThroughDir !== undefined) {
      if (!isS3Url(root)) throw new RuntimeError('INVALID_ARGUMENT', 's3 and readThroughDir apply to s3:// caches only', { root });
      storeOptions.s3 = { ...options.s3, ...(options.readThroughDir !== undefined ? { readThroughDir: options.readThroughDir } : {}) };
    }
    store = await openCacheStore(root, storeOptions);
    if (storeOptions.sliceBindingsPerFile === true) markBindingsPerFile(store);
  } catch (error) {
    if (error instanceof RuntimeError) throw error;
    const code = (error as { code?: unknown } | null)?.code;
    // The store refused an argument (refreshIntervalMs 0, an s3 setting, a URL-like root): the
    // caller's mistake, not a missing cache. As CACHE_OPEN_FAILED a loader that runs raw without a
    // cache silently ran without one over a typo.
    if (code === 'INVALID_ARGUMENT' && isStoreError(error)) {
      throw new RuntimeError('INVALID_ARGUMENT', `cannot open the shard cache at ${root}: ${error.message}`, { root, storeCode: code }, { cause: error });
    }
    // A directory cache a live writer is creating (a first build between its lock and its first
    // manifest): there is no cache yet, but the same open succeeds once the creator wrote it (in
    // seconds), so it is retryable as an unreachable store is: CACHE_UNAVAILABLE. Not when that
    // creator is stopped (SIGSTOP, a debugger): nothing changes until someone resumes or ends it.
    const creating = isStoreError(error, 'NOT_A_CACHE') && error.details.reason === 'being-created' ? error.details : undefined;
    const retryable = isRetryableError(error) || (creating !== undefined && creating.holderStopped !== true);
    const modelFiles = isStoreError(error, 'NOT_A_CACHE') && creating === undefined && !isS3Url(root) ? await findModelFiles(root) : [];
    const reason = nameFilesWithinRoot(describeOpenFailure(error, root, modelFiles), root);
    throw new RuntimeError(retryable ? 'CACHE_UNAVAILABLE' : 'CACHE_OPEN_FAILED', `cannot open the shard cache at ${root}: ${reason}`, {
      root,
      storeCode: code,
      retryable,
      ...(modelFiles.length > 0 ? { reason: 'model-directory', modelFiles } : {}),
      ...(creating !== undefined ? { reason: 'being-created', holder: creating.holder, holderStopped: creating.holderStopped === true } : {}),
    }, { cause: error });
  }
  return wrapCacheStore(store, { coverageMin: options.coverageMin, objectSources: options.objectSources, fileSources: options.fileSources });
}

/**
 * What a store's refusal to open `root` says to a loader. A missing cache's store hint, `open with
 * create: true` (or `a build with create` for an s3:// bucket), names an option openShardCache
 * does not take (a loader opens what a build made): it becomes the build that makes one.
 */
function describeOpenFailure(error: unknown, root: string, modelFiles: readonly string[]): string {
  if (isStoreError(error, 'MANIFEST_INVALID') && !isS3Url(root) && error.details.reason !== 'not-a-file' && error.details.reason !== 'older-copy') {
    // A cut-off or damaged manifest (a full disk, a copy stopped part way): the builder's way out, as `splitzip verify` names it.
    return `${describeError(error).message}; the cache's index of entries cannot be read: \`splitzip verify ${root}\` says what is damaged, and \`splitzip build <model> --out ${root} --repair\` keeps the entries that still check out and binds the model's tensors again`;
  }
  if (modelFiles.length > 0) {
    // Building into it (the hint below) would put the cache's files beside the shards.
    const shown = modelFiles.length > 3 ? `${modelFiles.slice(0, 3).join(', ')} and ${modelFiles.length - 3} more` : modelFiles.join(', ');
    return `NOT_A_CACHE: not a SplitZip cache: it looks like a model directory (it holds ${shown}, and no manifest.json): pass the cache's directory (the --out of the build that made it), or make one for this model in a directory of its own: \`splitzip build ${root} --out <cache dir>\``;
  }
  if (!isStoreError(error) || error.code !== 'NOT_A_CACHE' || !/\bcreate\b/.test(error.reason)) return describeError(error).message;
  const reason = error.reason.replace(/\s*\([^()]*\bcreate\b[^()]*\)\s*$/, '');
  // Not the root's own file (`no manifest.json` says which, and the message names the root).
  const base = trimTrailingSeparators(root);
  const ownFile = error.path !== undefined && error.path.startsWith(`${base}/`) && !error.path.slice(base.length + 1).includes('/');
  const where = [error.entry !== undefined ? `entry ${error.entry}` : '', error.path !== undefined && !ownFile ? `file ${error.path}` : ''].filter(Boolean).join(', ');
  const bucket = /\bbucket\b/.test(reason) ? ' (which makes the bucket too)' : '';
  return `${error.code}: ${reason}${where ? ` (${where})` : ''}: build one with \`splitzip build <model> --out ${root}\`${bucket}`;
}

/**
 * `message` with a file it names inside `root` relative to it (`(file manifest.json)`), and `(file
 * <root>)` left out: the error's first words name the root, and a long path read two or three times
 * (commands to copy still name it whole).
 */
function nameFilesWithinRoot(message: string, root: string): string {
  const base = trimTrailingSeparators(root);
  return message.replaceAll(` (file ${base})`, '').replaceAll(`(file ${base}/`, '(file ').replaceAll(`(file ${base}\\`, '(file ');
}

/** `cache/` as `cache` (a root of `/` stays). */
function trimTrailingSeparators(root: string): string {
  return root.replace(/(?<=.)[/\\]+$/, '');
}

/** The safetensors files and indexes in `root` (a model's directory given as the cache), sorted; none when it cannot be listed. */
async function findModelFiles(root: string): Promise<string[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  return names.filter((name) => name.endsWith('.safetensors') || name.endsWith('.safetensors.index.json')).sort();
}

/** Wraps an already-open store (a builder that just wrote it, a test) as a runtime cache handle. */
export function wrapCacheStore(
  store: CacheStore,
  options: { coverageMin?: number | undefined; objectSources?: ObjectSourcePolicy | undefined; fileSources?: ObjectSourcePolicy | undefined } = {},
): ShardCache {
  if (typeof store !== 'object' || store === null || typeof (store as { entries?: unknown }).entries !== 'function') {
    throw new RuntimeError('INVALID_ARGUMENT', 'wrapCacheStore needs a CacheStore (openCacheStore from @splitzip/store)', { option: 'store' });
  }
  checkOptionsArgument(options, WRAP_CACHE_STORE_OPTIONS);
  checkCoverageArgument(options.coverageMin);
  checkSourcePolicyArgument(options.objectSources, 'objectSources');
  checkSourcePolicyArgument(options.fileSources, 'fileSources');
  const coverageMin = options.coverageMin ?? (store.coverageMin > 0 ? store.coverageMin : DEFAULT_COVERAGE_MIN);
  // Entries above MAX_SLOT_BYTES are left out: no slot can hold them (their loads are SLOT_TOO_SMALL,
  // served raw). Counted in, one such entry (or a damaged manifest's) made every pool INVALID_ARGUMENT.
  const largestPayloadBytes = (entries: Iterable<CacheEntry> = store.entries()) => {
    // `entries: 5` was a TypeError ("entries is not iterable"), a null item another one.
    if (typeof (entries as { [Symbol.iterator]?: unknown } | null)?.[Symbol.iterator] !== 'function') {
      throw argumentError('entries', 'an iterable of cache entries (cache.store.entries(), lookups)', entries);
    }
    let largest = 0;
    for (const entry of entries) {
      const compBytes = (entry as CacheEntry | null | undefined)?.compBytes;
      if (typeof compBytes !== 'number') throw argumentError('entries', 'an iterable of cache entries (cache.store.entries(), lookups)', entries, `: an item is ${describeValue(entry)}`);
      if (compBytes > largest && compBytes <= MAX_SLOT_BYTES) largest = compBytes;
    }
    return largest;
  };
  // A closed store says STORE_CLOSED in its own error type; a loader branches on the runtime's. Blob
  // reads are left as they are: one in flight when the cache closes fails as a cache failure, and
  // its tensor is served raw.
  const closedError = (cause: unknown) =>
    new RuntimeError('CACHE_CLOSED', `the shard cache at ${store.root} is closed`, { root: store.root }, { cause });
  const mapClosed = (error: unknown) => ((error as { code?: unknown })?.code === 'STORE_CLOSED' ? closedError(error) : error);
  const guard = <T>(run: () => T): T => {
    try {
      return run();
    } catch (error) {
      throw mapClosed(error);
    }
  };
  const guardAsync = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw mapClosed(error);
    }
  };
  // Pools are the handle's own: a store lookup (of no key) says whether the store is closed.
  const assertOpen = () => guard(() => store.getEntry(''));
  return {
    root: store.root,
    remote: isS3Url(store.root),
    store,
    coverageMin,
    objectSources: options.objectSources ?? 'check',
    fileSources: options.fileSources ?? 'check',
    lookup: (bytes, shape, dtype) => guard(() => store.lookup(bytes, shape, dtype)),
    lookupBySlice: (shardName, offsetBytes, sizeBytes) => guard(() => store.lookupBySlice(shardName, offsetBytes, sizeBytes)),
    // The stamp only where given: a caller's store of an older release takes three arguments.
    lookupSliceBinding: (shardName, offsetBytes, sizeBytes, stamp) =>
      guard(() => (stamp === undefined ? store.lookupSliceBinding(shardName, offsetBytes, sizeBytes) : store.lookupSliceBinding(shardName, offsetBytes, sizeBytes, stamp))),
    lookupSliceBindings: (shardName, offsetBytes, sizeBytes) =>
      guard(() => {
        if (typeof store.lookupSliceBindings === 'function') return store.lookupSliceBindings(shardName, offsetBytes, sizeBytes);
        // A caller's store without it holds one binding per slice at most.
        const one = store.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
        return one === undefined ? [] : [one];
      }),
    getEntry: (key) => guard(() => store.getEntry(key)),
    aliasSlice: (keyOrBytes, shardName, offsetBytes, sizeBytes, stamp) => guardAsync(() => store.aliasSlice(keyOrBytes, shardName, offsetBytes, sizeBytes, stamp)),
    // Not guarded, like readBlob: a check in flight when the cache closes is a cache failure (served raw).
    checkBlob: typeof store.checkBlob === 'function' ? (key) => store.checkBlob(key) : undefined,
    readBlob: async (key, stagingSlot, readOptions) => {
      const bytes = slotBytes(stagingSlot);
      const unmark = markBytesReading(bytes, stagingSlot);
      try {
        return await store.readBlob(key, bytes, readOptions);
      } finally {
        unmark();
      }
    },
    readBlobSync: store.readBlobSync
      ? (key, stagingSlot, readOptions) => {
          const bytes = slotBytes(stagingSlot);
          const unmark = markBytesReading(bytes, stagingSlot); // a sync read ends before any other starts
          try {
            return (store.readBlobSync as NonNullable<CacheStore['readBlobSync']>).call(store, key, bytes, readOptions);
          } finally {
            unmark();
          }
        }
      : undefined,
    openBlobSync: store.openBlobSync
      ? (key, stagingSlot) => (store.openBlobSync as NonNullable<CacheStore['openBlobSync']>).call(store, key, stagingSlot)
      : undefined,
    discardLocalCopy: (key) => (store.discardLocalCopy ? store.discardLocalCopy(key) : Promise.resolve()),
    refresh: () => guardAsync(() => store.refresh()),
    blobPath: (entry) => (isS3Url(store.root) ? `${store.root.endsWith('/') ? store.root : `${store.root}/`}${entry.blob}` : join(store.root, entry.blob)),
    largestPayloadBytes,
    createStagingPool(poolOptions = {}) {
      assertOpen();
      checkOptionsArgument(poolOptions, CACHE_POOL_OPTIONS);
      checkBooleanArgument(poolOptions.shared, 'shared');
      const slotCount = poolOptions.slotCount ?? 4;
      checkSlotCountArgument(slotCount); // createStagingPool's rule, checked before the entries are read
      checkSlotWaitArgument(poolOptions.slotWaitMs);
      return createStagingPool({
        slotBytes: largestPayloadBytes(poolOptions.entries),
        slotCount,
        shared: poolOptions.shared ?? false,
        slotWaitMs: poolOptions.slotWaitMs,
      });
    },
    borrowStagingPool(request) {
      assertOpen();
      checkOptionsArgument(request, BORROW_POOL_OPTIONS);
      const { slotBytes, shared = false, threads = 0 } = request;
      checkSlotCountArgument(request.slotCount);
      // loadModel asks for a slot per tensor in flight (maxStagingBytes: Infinity, up to 64 of its
      // largest payload): it gets as many as MAX_STAGING_POOL_BYTES holds (fewer payloads in flight,
      // as maxStagingBytes does), not a refusal of its own pool. An invalid slotBytes is createStagingPool's to refuse.
      const slotCount = Number.isSafeInteger(slotBytes) && slotBytes >= 0 ? Math.max(1, Math.min(request.slotCount, maxSlotCountFor(slotBytes))) : request.slotCount;
      const pool = takeIdleStagingPool({ slotBytes, slotCount, shared, threads }) ?? createStagingPool({ slotBytes, slotCount, shared, threads });
      let given = false;
      return {
        pool,
        giveBack() {
          if (given) return;
          given = true;
          keepIdleStagingPool(pool, shared);
        },
      };
    },
    flushObjectStamps: () => flushObjectStamps(store),
    // The stamps queued by this process's loads first (they never reject: failures are counted).
    close: async () => {
      await flushObjectStamps(store);
      // Beside an older copy of the manifest put back (a backup restore), the store refuses to
      // compact at close; the bindings this handle recorded are durable in the journal, so a
      // loader's close is no failure (it threw at every close: review). verify and gc report it.
      await store.close().catch((error: unknown) => {
        if (!(isStoreError(error) && error.code === 'MANIFEST_INVALID' && error.details.reason === 'older-copy')) throw error;
      });
    },
  };
}

/**
 * The byte ranges blob reads are filling now, by buffer. A second read into memory a first still
 * fills overwrote its payload under it: the first failed META_MISMATCH / BLOB_CORRUPT (blaming the
 * cache), or resolved with the other blob's bytes after its checks had passed. By memory, not by
 * the object passed: a slot and its `bytes`, or two views of one buffer, are the same bytes.
 */
const rangesReading = new WeakMap<ArrayBufferLike, Set<{ start: number; end: number }>>();

/** Marks `bytes` as being filled until the returned function runs; SLOT_BUSY if a read already fills any of it. */
function markBytesReading(bytes: Uint8Array, stagingSlot: StagingSlot | Uint8Array): () => void {
  // Not a Uint8Array: nothing to mark, and the store's argument check says what is wrong.
  if (!(bytes instanceof Uint8Array)) return () => undefined;
  const range = { start: bytes.byteOffset, end: bytes.byteOffset + bytes.byteLength };
  let ranges = rangesReading.get(bytes.buffer);
  for (const other of ranges ?? []) {
    if (range.start < other.end && other.start < range.end) {
      const slotId = stagingSlot instanceof Uint8Array ? undefined : stagingSlot.id;
      throw new RuntimeError('SLOT_BUSY', `staging ${slotId === undefined ? 'buffer' : `slot ${slotId}`} is still being filled by another blob read: wait for it, or use another slot`, { slotId });
    }
  }
  if (ranges === undefined) rangesReading.set(bytes.buffer, (ranges = new Set()));
  ranges.add(range);
  const held = ranges;
  return () => held.delete(range);
}

/** A staging slot's bytes, or the Uint8Array given; anything else goes on to the store, which refuses it (INVALID_ARGUMENT) instead of a TypeError here. */
function slotBytes(stagingSlot: StagingSlot | Uint8Array): Uint8Array {
  if (stagingSlot instanceof Uint8Array) return stagingSlot;
  if (typeof stagingSlot === 'object' && stagingSlot !== null && isStagingSlotReleased(stagingSlot)) {
    // Another holder may own it now: reading into it would overwrite their payload.
    throw new RuntimeError('SLOT_NOT_OWNED', `staging slot ${stagingSlot.id} is not acquired (released, or never taken): acquire a slot before reading into it`, { slotId: stagingSlot.id });
  }
  const bytes = (stagingSlot as StagingSlot | null | undefined)?.bytes;
  return bytes instanceof Uint8Array ? bytes : (stagingSlot as unknown as Uint8Array);
}
