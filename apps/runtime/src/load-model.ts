import type { SafetensorsModel, TensorInfo } from '@splitzip/safetensors';
import type { CacheEntry, S3StoreOptions } from '@splitzip/store';
import type { ByteReader } from './create-file-reader.js';
import { MAX_SLOT_BYTES, type StagingPool } from './create-staging-pool.js';
import { describeError, isRetryableError, RuntimeError } from './errors.js';
import { describeJournalDamage } from './check-source-bytes.js';
import { argumentError, checkBooleanArgument, checkByteCountArgument, checkCacheArgument, checkCacheOnlyHasCache, checkFunctionArgument, checkModelArgument, checkOptionsArgument, checkPoolArgument, checkReaderArgument, checkSignalArgument, optionNames } from './check-load-arguments.js';
import { createReadWindow, DEFAULT_READ_WINDOW_BYTES } from './create-read-window.js';
import { linkAbortSignal } from './link-abort-signal.js';
import { openModel } from './open-model.js';
import type { ShardCache } from './open-shard-cache.js';
import { checkBackendOpen, ownsDecodeBackend, resolveDecodeBackend, type BackendOption } from './resolve-decode-backend.js';
import { targetFromInfo } from './resolve-tensor-request.js';
import { runOrderedPipeline } from './run-ordered-pipeline.js';
import { DEFAULT_SYNC_READ_MAX_BYTES, checkAllocatedBuffer, serveTensor, type ServeEnv, type ServeTarget } from './serve-tensor.js';
import { addToTotals, createEmptyTotals, diffReadThroughStats, type LoadedTensor, type LoadTotals, type TensorReport } from './types.js';

function mapRefreshError(error: unknown, cache: ShardCache): RuntimeError {
  if (error instanceof RuntimeError) return error;
  const retryable = isRetryableError(error);
  return new RuntimeError(retryable ? 'CACHE_UNAVAILABLE' : 'CACHE_READ_FAILED', `refresh of the cache at ${cache.root} failed: ${describeError(error).message}`, {
    root: cache.root,
    storeCode: (error as { code?: unknown } | null)?.code,
    retryable,
  }, { cause: error });
}

/** Store error codes of a refresh that found a file of the cache damaged (its snapshot stays usable). */
const DAMAGED_CACHE_CODES: ReadonlySet<string> = new Set([
  'MANIFEST_INVALID',
  'JOURNAL_INVALID',
  'UNSUPPORTED_FORMAT',
  'ENTRY_INVALID',
  'SIZE_INVALID',
  'INVALID_CODEBOOK',
  'UNSUPPORTED_PAYLOAD_VERSION',
  'UNSAFE_BLOB_PATH',
  'SLICE_CONFLICT',
  'SLICE_SIZE_MISMATCH',
  'IO_ERROR',
  // A full disk or quota (the store's NO_SPACE, IO_ERROR before 2026-12-06): the snapshot still serves.
  'NO_SPACE',
]);

/**
 * Tensors being read or decoded at once by default: measured on 2 cores behind a 1 GB/s paced
 * link, 8 keeps the link ~97% busy where 4 left it ~90% (bench/run-bench.mjs).
 */
export const DEFAULT_LOAD_CONCURRENCY = 8;

/**
 * Default cap on staging memory per load. Slots are sized from the largest payload, so a model
 * with one huge tensor would otherwise pin concurrency × that payload; above this budget the load
 * uses fewer slots (at least one), i.e. fewer payloads in flight, not smaller ones.
 */
export const DEFAULT_MAX_STAGING_BYTES = 512 * 1024 * 1024;

/** Upper bound on concurrency: each in-flight tensor may hold a staging slot and an output buffer. */
export const MAX_LOAD_CONCURRENCY = 64;

/**
 * Tensors of at most this many bytes count neither toward `concurrency` nor toward the pipeline's
 * bound on results held for in-order delivery (4 × concurrency; they have one of their own): their
 * reads are next to nothing and they hold no output worth bounding. Counted, a run of them — the
 * default model has 48 under 4 KiB among its 61 — filled the places, so the paced link drained
 * with every read in flight answered at once and sat idle while those tensors were decoded
 * (0.2-0.4 ms, several times a load), instead of carrying the next large tensors' reads. (A small
 * cache payload still takes a staging slot, which bounds those.)
 */
export const LIGHT_TENSOR_MAX_BYTES = 64 * 1024;

export interface LoadModelOptions {
  backend?: BackendOption | undefined;
  /** Tensors in flight (reading or decoding) at once; also the staging slot count. Default DEFAULT_LOAD_CONCURRENCY (8). */
  concurrency?: number | undefined;
  /** Check every decoded tensor against its content key (SHA-1 of shape, dtype and the original bytes). */
  verifyDigest?: boolean | undefined;
  /** Throw a typed error for any tensor the cache cannot serve, instead of reading it raw. */
  cacheOnly?: boolean | undefined;
  /**
   * Called with each tensor, in model order, before the iterator yields it. When it returns a
   * promise (an async function: an upload of the tensor to a device), the load waits for it before
   * the next tensor is delivered, and its rejection fails the load as a throw does. (Two members,
   * not one returning `void | PromiseLike<void>`: that type refused `(t) => seen.push(t)`.)
   */
  onTensor?: ((tensor: LoadedTensor) => void) | ((tensor: LoadedTensor) => PromiseLike<void>) | undefined;
  /** Where each tensor's bytes go (e.g. a view into a preallocated arena); default: a new buffer per tensor. */
  allocate?: ((tensor: TensorInfo) => Uint8Array) | undefined;
  /** Only these tensors (default: all, in model order); decided synchronously (a returned promise is INVALID_ARGUMENT). */
  filter?: ((tensor: TensorInfo) => boolean) | undefined;
  /** A staging pool to use (shared across loads); default: one sized from the model's largest entry. */
  pool?: StagingPool | undefined;
  /** Custom I/O for both paths (e.g. the pacing reader). */
  reader?: ByteReader | undefined;
  /** Cap on the default pool's memory (slot count × largest payload); default 512 MiB. */
  maxStagingBytes?: number | undefined;
  /** Refresh the cache from other processes before starting. Default true. */
  refresh?: boolean | undefined;
  /** Tell `coverage` from `missing` for uncached BF16 tensors (a histogram pass over them). Default true. */
  explainMisses?: boolean | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Read blobs up to this many bytes from a local cache with synchronous calls (default
   * DEFAULT_SYNC_READ_MAX_BYTES; 0: never, e.g. on network file systems where a read can block long).
   */
  syncReadMaxBytes?: number | undefined;
  /** When `model` is a location: S3 settings for an `s3://` model (see openModel; `readThroughDir` keeps its fetched ranges on this host). */
  modelS3?: S3StoreOptions | undefined;
  /**
   * Bytes being read at once, blobs and raw tensors together (default DEFAULT_READ_WINDOW_BYTES
   * with a local cache; unbounded without a cache or with an object-store cache); a read larger
   * than the window runs alone. `Infinity`: every tensor in flight reads at once.
   */
  readWindowBytes?: number | undefined;
}

/** A whole-model load: iterate it (once) for the tensors; `totals` and `reports` fill as it goes. */
export interface ModelLoad extends AsyncIterable<LoadedTensor> {
  readonly totals: LoadTotals;
  readonly reports: readonly TensorReport[];
  /**
   * Iterates to the end, discarding tensors (use `onTensor`/`allocate` to keep them); returns the
   * totals. After an iteration that ran to its end (a `for await` that was not left early) it returns
   * those totals at once; after one that ended early — `break`, `return` or a throw out of the loop,
   * even after the last tensor, or a load that failed — or while one is going on, it throws
   * INVALID_ARGUMENT as a second iteration does (the load did not finish: its totals are partial).
   */
  drain(): Promise<LoadTotals>;
}

/**
 * Loads every tensor of `model`, in model order: decoded from `cache` where an entry serves it,
 * read raw from the shards otherwise (`cache` null: everything raw — the baseline). Up to
 * `concurrency` tensors are being read or decoded at once, so the reads of the next payloads run
 * while the current ones decode, and a large tensor at the head does not idle the others. Memory:
 * staging is at most `concurrency` slots of the largest payload (capped by `maxStagingBytes`);
 * outputs of at most 4 × `concurrency` tensors are held for in-order delivery beyond what the
 * caller keeps (none extra when `allocate` hands out arena views).
 */
/**
 * A model loadModel opened from a location is closed when its load ends (end, break, error, abort).
 * An iterator dropped between two `next()` calls never ends: its model's files are closed when the
 * iterator is garbage-collected, here, rather than by Node's own last-resort close (which warns).
 */
const abandonedModels = new FinalizationRegistry<SafetensorsModel>((model) => {
  void model.close().catch(() => undefined);
});

const LOAD_MODEL_OPTIONS = optionNames<LoadModelOptions>({
  backend: true,
  concurrency: true,
  verifyDigest: true,
  cacheOnly: true,
  onTensor: true,
  allocate: true,
  filter: true,
  pool: true,
  reader: true,
  maxStagingBytes: true,
  refresh: true,
  explainMisses: true,
  signal: true,
  syncReadMaxBytes: true,
  modelS3: true,
  readWindowBytes: true,
});

export function loadModel(modelOrLocation: SafetensorsModel | string, cache: ShardCache | null | undefined, options: LoadModelOptions = {}): ModelLoad {
  if (typeof modelOrLocation !== 'string') checkModelArgument(modelOrLocation);
  // `cache` too: loadTensor's options hold it, and `loadModel(model, { cache })` is that habit.
  checkCacheArgument(cache, 'cache', { call: 'loadModel', known: [...LOAD_MODEL_OPTIONS, 'cache'] });
  checkOptionsArgument(options, LOAD_MODEL_OPTIONS);
  for (const option of ['allocate', 'filter', 'onTensor'] as const) checkFunctionArgument(options[option], option);
  for (const option of ['verifyDigest', 'cacheOnly', 'refresh', 'explainMisses'] as const) checkBooleanArgument(options[option], option);
  checkCacheOnlyHasCache(options.cacheOnly, cache, 'pass one as loadModel(model, cache, { cacheOnly: true })');
  checkPoolArgument(options.pool);
  checkReaderArgument(options.reader);
  checkSignalArgument(options.signal);
  checkByteCountArgument(options.maxStagingBytes, 'maxStagingBytes');
  checkByteCountArgument(options.syncReadMaxBytes, 'syncReadMaxBytes');
  const concurrency = options.concurrency ?? DEFAULT_LOAD_CONCURRENCY;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > MAX_LOAD_CONCURRENCY) {
    throw argumentError('concurrency', `an integer in 1..${MAX_LOAD_CONCURRENCY}`, concurrency);
  }
  // The window lets decoding start early behind one shared link (a local disk, network storage). By
  // default it is off where it cannot help: a load without a cache decodes nothing (serializing its
  // reads only slowed raw page-cache loads), and an object store serves parallel GETs faster than
  // fewer (per-request throughput, not one link, is its limit: run-s3-bench.mjs).
  const readWindowBytes = options.readWindowBytes ?? (cache && !cache.remote ? DEFAULT_READ_WINDOW_BYTES : Infinity);
  const readWindow = readWindowBytes === Infinity ? undefined : createReadWindow(readWindowBytes);
  const backend = resolveDecodeBackend(options.backend);
  checkBackendOpen(backend);
  const totals = createEmptyTotals();
  const reports: TensorReport[] = [];
  let started = false;
  // Set once the iteration ended normally (every tensor delivered, the model closed): drain() then
  // returns the totals. A `break` out of the caller's loop returns the generator at its `yield`,
  // so the loops below never finish and this stays false.
  let completed = false;

  async function* iterate(onOpened: (model: SafetensorsModel) => () => void): AsyncGenerator<LoadedTensor> {
    const startMs = performance.now();
    const handle = cache ?? undefined;
    // The refresh (object-store LISTs) runs while the model opens (its own round trips); settled
    // into a value so that a model that fails to open leaves no unhandled rejection.
    const refreshed: Promise<{ error: unknown } | undefined> | undefined =
      handle !== undefined && options.refresh !== false ? handle.refresh().then(() => undefined, (error: unknown) => ({ error })) : undefined;
    // A location is opened here and closed when the load ends.
    let model: SafetensorsModel;
    try {
      model = typeof modelOrLocation === 'string' ? await openModel(modelOrLocation, { s3: options.modelS3 }) : modelOrLocation;
    } catch (error) {
      await refreshed;
      throw error;
    }
    const forget = model !== modelOrLocation ? onOpened(model) : undefined;
    const link = linkAbortSignal(options.signal);
    try {
      yield* loadOpened(model, handle, startMs, refreshed, link.signal);
    } finally {
      link.unlink();
      forget?.();
      if (model !== modelOrLocation) await model.close();
    }
    // After the cleanup: a close that failed failed the loop, so drain() must not report it done.
    completed = true;
  }

  async function* loadOpened(
    model: SafetensorsModel,
    handle: ShardCache | undefined,
    startMs: number,
    refreshed: Promise<{ error: unknown } | undefined> | undefined,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<LoadedTensor> {
    const refreshFailure = await refreshed;
    const readThroughStart = handle?.store.readThroughStats?.();
    const noteReadThrough = (): void => {
      const now = readThroughStart && handle?.store.readThroughStats?.();
      if (now) totals.readThrough = diffReadThroughStats(now, readThroughStart);
    };
    noteReadThrough();
    if (handle !== undefined && refreshFailure !== undefined) {
      const { error } = refreshFailure;
      // The snapshot already loaded is still correct (raw for slices it does not know; every blob
      // read is checked), so a load goes on without the refresh unless only the cache may serve:
      // when the store is out of reach, and when a file it reads is damaged on disk (a cache
      // problem, reported as a damaged blob is; it stopped every later load of a long-running
      // loader before). Anything else (a closed handle, a store aborted on purpose, a bug) stops it.
      const code = (error as { code?: unknown } | null)?.code;
      const goOn = isRetryableError(error) || (typeof code === 'string' && DAMAGED_CACHE_CODES.has(code));
      if (options.cacheOnly || !goOn) throw mapRefreshError(error, handle);
      totals.refreshError = describeError(error);
    }
    const journalDamage = handle === undefined ? undefined : describeJournalDamage(handle);
    if (journalDamage !== undefined) totals.journalDamage = journalDamage;
    const infos = options.filter ? filterTensors(model.tensors, options.filter) : model.tensors;
    const checkedShards = new Map<string, string | null>();
    const targets: ServeTarget[] = infos.map((info) => targetFromInfo(model, info, handle, checkedShards));
    const entries = targets.map((target) => target.entry).filter((entry): entry is CacheEntry => entry !== undefined);
    const ownPool = options.pool === undefined && handle !== undefined && entries.length > 0;
    // Backends made here from a name are closed here; 'threads' is the process-wide pool (kept).
    const ownBackend = ownsDecodeBackend(options.backend, backend);
    // Worker decoders read payloads without a copy when the slots are shared memory.
    const shared = (backend as { shared?: boolean }).shared === true;
    const maxStagingBytes = options.maxStagingBytes ?? DEFAULT_MAX_STAGING_BYTES;
    // With the store unreachable (the refresh failed) a check per large entry would only wait out its
    // retries before the load starts: such entries are left to their own loads, which check them.
    const confirm = totals.refreshError === undefined;
    const largestBytes = ownPool && handle !== undefined ? await largestConfirmedPayloadBytes(handle, entries, maxStagingBytes, confirm, signal) : 0;
    const slotCount = Math.max(1, Math.min(concurrency, Math.floor(maxStagingBytes / Math.max(1, largestBytes))));
    // Thread decoders attach to the pool's codec arena: one kernel scratch area per thread.
    const threads = shared ? ((backend as { threads?: number }).threads ?? 0) : 0;
    const borrowed = ownPool ? handle?.borrowStagingPool({ slotBytes: largestBytes, slotCount, shared, threads }) : undefined;
    const pool = options.pool ?? borrowed?.pool;
    const env: ServeEnv = {
      cache: handle,
      pool,
      reader: options.reader,
      backend,
      verifyDigest: options.verifyDigest ?? false,
      cacheOnly: options.cacheOnly ?? false,
      explainMisses: options.explainMisses ?? true,
      signal,
      syncReadMaxBytes: options.syncReadMaxBytes ?? DEFAULT_SYNC_READ_MAX_BYTES,
      readWindow,
      onStagingOverflow: () => {
        totals.stagingOverflows += 1;
      },
    };
    try {
      const results = runOrderedPipeline(targets, {
        concurrency,
        signal,
        isLight: (target) => target.slice.sizeBytes <= LIGHT_TENSOR_MAX_BYTES,
        run: async (target) => {
          // No `allocate`: the runtime allocates each tensor's buffer where it is first written.
          const { allocate } = options;
          const given = allocate === undefined ? undefined : checkAllocatedBuffer(allocate(target.info as TensorInfo), target.slice.sizeBytes, target.name);
          return serveTensor(env, target, given);
        },
      });
      for await (const tensor of results) {
        reports.push(tensor.report);
        addToTotals(totals, tensor.report);
        noteReadThrough();
        totals.wallMs = performance.now() - startMs;
        // A promise from onTensor (an upload) is awaited before the next delivery; the reads and
        // decodes already started go on meanwhile, within the pipeline's bounds. A rejection
        // leaves through here as a throw does, so the same cleanup follows.
        const delivered = options.onTensor?.(tensor);
        if (isThenable(delivered)) await delivered;
        yield tensor;
      }
    } finally {
      noteReadThrough();
      totals.wallMs = performance.now() - startMs;
      borrowed?.giveBack();
      if (ownBackend) await backend.close?.();
    }
  }

  return {
    totals,
    reports,
    [Symbol.asyncIterator]() {
      if (started) throw new RuntimeError('INVALID_ARGUMENT', 'a ModelLoad can be iterated once; call loadModel again');
      started = true;
      const iterator: AsyncGenerator<LoadedTensor> = iterate((model) => {
        abandonedModels.register(iterator, model, iterator);
        return () => abandonedModels.unregister(iterator);
      });
      return iterator;
    },
    async drain() {
      if (completed) return totals;
      if (started) {
        throw new RuntimeError('INVALID_ARGUMENT', 'drain() after an iteration of this ModelLoad that ended early (break, return or a throw) or is still going on: a ModelLoad can be iterated once; call loadModel again');
      }
      for await (const _tensor of this) {
        // consumed by onTensor / allocate
      }
      return totals;
    },
  };
}

/** A promise or any object with a `then` method (what `await` would wait for). */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * `tensors` that `filter` keeps. A filter that returns a promise (an async function) is refused:
 * a promise is truthy, so every tensor was kept whatever it would have decided.
 */
function filterTensors(tensors: readonly TensorInfo[], filter: (tensor: TensorInfo) => boolean): TensorInfo[] {
  return tensors.filter((tensor, index, all) => {
    const keep: unknown = (filter as (tensor: TensorInfo, index: number, all: readonly TensorInfo[]) => unknown)(tensor, index, all);
    if (!isThenable(keep)) return keep as boolean;
    // Its outcome is not waited for: a rejection must not be unhandled either (any thenable: a
    // promise of another realm is not `instanceof Promise`).
    try {
      keep.then(undefined, () => undefined);
    } catch {
      // A `then` that throws: nothing pending to leave unhandled.
    }
    throw new RuntimeError('INVALID_ARGUMENT', `filter returned a promise for ${tensor.name}: it must decide synchronously (return true or false, not an async function)`, {
      option: 'filter',
      tensor: tensor.name,
    });
  });
}

/**
 * The largest payload among `entries` a slot can hold, where one above `capBytes` (which alone
 * would make a slot larger than the staging cap) counts only once the store confirmed its blob has
 * that size: a damaged or hostile entry bound to one of the model's tensors could claim ~4.3 bytes
 * a value and size the pool before its read found the blob missing. An entry that fails the check
 * is left to its own load, which checks again and serves the tensor raw. Without `confirm` (the
 * store is unreachable) or once `signal` aborts, entries above the cap are left out unchecked the same way.
 */
async function largestConfirmedPayloadBytes(
  cache: ShardCache,
  entries: readonly CacheEntry[],
  capBytes: number,
  confirm: boolean,
  signal: AbortSignal | undefined,
): Promise<number> {
  const above = entries.filter((entry) => entry.compBytes > capBytes && entry.compBytes <= MAX_SLOT_BYTES).sort((a, b) => b.compBytes - a.compBytes);
  for (const entry of above) {
    if (cache.checkBlob === undefined) return entry.compBytes;
    if (!confirm || signal?.aborted) break; // the store is unreachable, or the load is ending: no more checks
    try {
      await cache.checkBlob(entry.key);
      return entry.compBytes;
    } catch {
      // Sized without it; its load reports the failure.
    }
  }
  return cache.largestPayloadBytes(above.length === 0 ? entries : entries.filter((entry) => entry.compBytes <= capBytes));
}
