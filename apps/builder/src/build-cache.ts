// The build: every tensor of a safetensors model into the cache store, streamed with bounded
// memory: read on the main thread, keyed (SHA-1), calibrated, encoded and the blob hashed on worker
// threads (gpu.js backends encode on the main thread), each entry committed as soon as it is
// encoded (so a build killed at any moment leaves a valid cache and a re-run only does what is missing).
import { availableParallelism } from 'node:os';
import { DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { readTensorBytes, type SafetensorsModel, type TensorInfo } from '@splitzip/safetensors';
import {
  DEFAULT_COVERAGE_MIN,
  DEFAULT_LOCK_TIMEOUT_MS,
  isS3Url,
  isStoreError,
  looksLikeOtherUrl,
  MAX_QUALNAME_CHARS,
  isSliceStampKept,
  MAX_SLICE_KEYS_PER_ENTRY,
  openCacheStore,
  recoverDamagedManifest,
  S3_LAYOUT_FORMAT_PER_FILE,
  type CacheEntry,
  type CacheStore,
  type SliceBinding,
  type SliceKeyTuple,
  type JournalRecovery,
  type ManifestRecovery,
  type ManifestRecoveryProgress,
  type TempFilesReport,
} from '@splitzip/store';
import { createCommitBatcher, type AliasAnswer, type CommitBatcher } from './create-commit-batcher.js';
import { describeUrlLikeLocation } from './check-cache-location.js';
import { checkCacheOutsideModel, checkS3CacheOutsideModel } from './check-cache-outside-model.js';
import { openBuilderModel } from './open-builder-model.js';
import { ensureCacheDir } from './ensure-cache-dir.js';
import { createTensorProcessor, REQUESTS_PER_WORKER, type TensorProcessor, type WorkerPlan } from './create-tensor-processor.js';
import { createSlabPool, slabBytesOf, type SlabPool } from './create-slab-pool.js';
import { countStartupWorkers, planBuildMemory, resolveBuildJobs, type BuildMemoryPlan } from './plan-build-memory.js';
import { codecEncoder, createValuesEncoder, type ValuesEncoder } from './create-values-encoder.js';
import type { EncodeBackend } from './encode-backends.js';
import { viewBf16, worstPayloadBytes } from './tensor-tasks.js';
import { interruptedError, throwIfInterrupted } from './throw-if-interrupted.js';
import { sliceConflictError, wrapBuildError, type ConflictingBinding } from './wrap-build-error.js';
import { checkKnownOptions, optionNamesOf } from './check-known-options.js';
import { BuilderError, isBuilderError } from './errors.js';
import { isCacheableSize, MAX_BUILD_JOBS } from './limits.js';
import { canPayloadShrink, isPayloadSmaller } from './check-payload-gain.js';
import { isBesideRefused, judgeSliceBindings, type JudgedSliceBindings } from './judge-slice-bindings.js';
import { checkCachedBlob } from './check-cached-blob.js';
import { NOT_REPAIRED, repairCachedBlob, type BlobRepair } from './repair-cached-blob.js';
import { isWriterLockHeldElsewhere } from './is-writer-lock-held-elsewhere.js';
import { watchWriterLock, type WriterLockWatch } from './watch-writer-lock.js';

/** The seed's gate (the store's default): encode only tensors whose Top-16 exponents cover 99 %. */
export { DEFAULT_COVERAGE_MIN };
export {
  MIN_IN_FLIGHT_BYTES,
  PROCESS_RSS_BYTES,
  RSS_BOUND_BASE_BYTES,
  RSS_BOUND_LARGEST_FACTOR,
  RSS_HEADROOM_BYTES,
  SLAB_LARGEST_FACTOR,
  WORKER_RSS_BYTES,
} from './plan-build-memory.js';
/**
 * Tensors in flight at most (read, keyed, calibrated, encoded or being committed), within the
 * slab: many small tensors in flight let the store group their commits (one record, one fsync).
 */
export const MAX_TENSORS_IN_FLIGHT = 32;
/**
 * Cached tensors whose only work left is their alias's commit (no slab memory or payload held), at
 * most, beyond MAX_TENSORS_IN_FLIGHT: the next tensors are read and keyed meanwhile, and every alias
 * that becomes ready while a commit runs goes into the next one (the store's group commit: one
 * journal record and fsync). Within MAX_TENSORS_IN_FLIGHT, a second model's cached tensors made one
 * commit per ~16 tensors here.
 */
export const MAX_ALIASES_IN_FLIGHT = 1024;
/** Raw tensors read ahead of the workers' queues (RAW_READ_AHEAD + jobs x REQUESTS_PER_WORKER held at most). */
export const RAW_READ_AHEAD = 2;
/** Payload bytes freed between two collectGarbage calls, at least (gpu.js backends allocate their payloads). */
export const GC_EVERY_MIN_BYTES = 4 * 1024 * 1024;

/** The slab views a tensor of `sizeBytes` takes in flight: its raw bytes and its worst payload. */
function slabSizesOf(sizeBytes: number, coverageMin: number, chunkSize: number): number[] {
  return [sizeBytes, worstPayloadBytes(sizeBytes / 2, coverageMin, chunkSize)];
}

/**
 * Memory one tensor holds while in flight: its raw bytes plus the largest payload a tensor passing
 * the gate can have (per value: 4-bit code + sign/mantissa byte, plus 3 bytes per escape, at most
 * a (1 - coverageMin) share of values; + chunk index and section padding).
 */
export function inFlightBytesOf(sizeBytes: number, coverageMin: number, chunkSize: number): number {
  const values = sizeBytes / 2;
  const payload = values * 1.5 + Math.ceil(values * (1 - coverageMin)) * 3 + (Math.ceil(values / chunkSize) + 1) * 4 + 6 * 256;
  return sizeBytes + Math.ceil(payload);
}

export type BuildTensorStatus = 'encoded' | 'cached' | 'skipped_coverage' | 'skipped_dtype' | 'skipped_size' | 'skipped_no_gain';

export interface BuildTensorReport {
  name: string;
  /** Content key; null for tensors that were not hashed (not BF16, too large). */
  key: string | null;
  shard: string;
  offsetBytes: number;
  sizeBytes: number;
  dtype: string;
  shape: number[];
  /**
   * encoded: stored by this run (also one found cached whose entry a gc --drop-unbound-entries
   * removed before this run bound it: stored again); cached: its entry was already there (an earlier run, another
   * model, or an identical tensor earlier in this model); skipped_*: served raw (the reason).
   */
  status: BuildTensorStatus;
  /** Top-16 exponent coverage (BF16 tensors only). */
  coverage: number | null;
  /** Payload bytes of its entry (encoded or cached), else null. */
  compBytes: number | null;
  /**
   * This run put the cached entry's blob back: any build where a stat showed it missing, of
   * another size or not a plain file; `--repair` also where its bytes were damaged. Kept on a
   * tensor stored anew because a gc --drop-unbound-entries then removed the entry (`encoded`).
   */
  repaired?: true;
  /** With `repaired`: what was wrong with the blob, where known (not under `--repair` on s3://). */
  repairedBlob?: 'missing' | 'damaged';
  /**
   * Its slice was left unbound: its entry holds MAX_SLICE_KEYS_PER_ENTRY slices already (thousands
   * of byte-identical tensors). A runtime serves it raw; everything else of the build goes on.
   */
  unaliased?: true;
  /**
   * Its slice was left unbound for this file (directory caches): the slice holds MAX_SLICE_BINDINGS
   * (8) bindings of files that changed more recently than this one, and the least recent goes, which
   * was this file's new binding (counted in `dropped_bindings`). Its entry is cached all the same: a
   * load of this file hashes the tensor and finds it by content key.
   */
  bindingDropped?: true;
  /**
   * A `rebindSlices` build, with `unaliased` or a skipped_* status: the entry its slice was bound to
   * before, whose bytes the file no longer holds (a shard changed in place); this run removed that
   * binding, since the slice could not move to the full entry, or the tensor is not cached.
   */
  unboundFrom?: string;
  /**
   * Not set since 0.56 (kept in the type for readers of older reports): a skipped tensor whose slice
   * was bound from another file of its shard name, kept. Other files' bindings are never in the way now.
   */
  keptBinding?: string;
  /**
   * Not set since 0.56 (kept in the type for readers of older reports): the entry a --rebind moved
   * the slice from, recorded with another file. A directory cache binds this file beside it now, as
   * an s3:// cache does for an s3:// model (its object stamps); for a local model an s3:// cache
   * records no file stamps to tell another file by.
   */
  reboundFrom?: string;
}

export interface BuildReport {
  model: string;
  cache: string;
  /** Entries this run stored (seed field). */
  encoded: number;
  /** Tensors whose entry was already in the cache. */
  cached: number;
  skipped_coverage: number;
  skipped_dtype: number;
  /** BF16 tensors above MAX_CACHED_TENSOR_BYTES (limits.ts): more than one payload or buffer holds. */
  skipped_size: number;
  /**
   * BF16 tensors whose payload would not be smaller than their raw bytes (check-payload-gain.ts:
   * under 1,409 values none is, the payload's header, codebook and chunk index outweighing them;
   * escapes make larger ones so too): served raw.
   */
  skipped_no_gain: number;
  /** Payload bytes of every tensor of the model served from the cache (encoded + cached). */
  comp_bytes: number;
  /** Raw bytes of the same tensors. */
  raw_bytes: number;
  /** comp_bytes / raw_bytes, null when nothing is cached. */
  ratio: number | null;
  /**
   * Payload bytes written by this run (new entries, and blobs put back: `repaired`), each once: a
   * blob put back whose entry a gc --drop-unbound-entries then removed counts as the entry stored anew.
   */
  stored_bytes: number;
  /** Slice bindings this run wrote: new ones, and file stamps added to existing ones. */
  aliased: number;
  /**
   * Cached entries whose missing or damaged blob this run put back (BuildTensorReport.repaired; counted
   * in `cached`, or in `encoded` where a gc --drop-unbound-entries then removed the entry: stored anew).
   */
  repaired: number;
  /** Tensors whose slice was left unbound (BuildTensorReport.unaliased). */
  unaliased: number;
  /** Of those, tensors whose slice's binding to the bytes the file held before this run removed (BuildTensorReport.unboundFrom). */
  unbound_stale: number;
  /**
   * Always 0 since 0.56, kept for scripts that read it. It counted the slice bindings a --rebind
   * moved from an entry recorded only with other files of the shard name (reboundFrom), whose loads
   * then read those tensors raw. A directory cache now binds a slice once per file: another file's
   * binding stands beside this model's and --rebind leaves it, as an s3:// cache's other revisions'
   * bindings beside an s3:// model's (object stamps); for a local model an s3:// cache records no
   * file stamps to tell another file by (it was 0 there before too).
   */
  rebound_other_files: number;
  /**
   * Bindings of other files' tensors this run's commits dropped (directory caches): a slice holds at
   * most MAX_SLICE_BINDINGS (8) bindings, one per file, and binding a ninth drops the one whose file
   * changed least recently. That file's loads then hash the tensor and find it by content key (its
   * next build binds it again); its entry stays unless a gc --drop-unbound-entries finds it unbound.
   */
  dropped_bindings: number;
  /**
   * This run made the cache hold its first slice bound for more than one file (revisions side by
   * side): from now on it is written as manifest format 3 / journal version 2, which releases
   * before 0.56 refuse (UNSUPPORTED_FORMAT). On s3://: this run moved cache.json to format 2 (an s3://
   * model's revisions bound side by side; releases up to 0.56 refuse it). False otherwise.
   */
  cache_format_moved: boolean;
  /**
   * This run made the cache hold its first binding of an object (an s3:// model's shard, ETag
   * stamps only) beside another binding of a slice: from now on it is written as manifest format 4
   * / journal version 3, which releases up to 0.57 refuse (UNSUPPORTED_FORMAT; FILE-BINDINGS.md
   * phase 3). False otherwise, and on s3://.
   */
  cache_object_format_moved: boolean;
  /**
   * Only in the report of a build stopped by a signal (the INTERRUPTED error's `context.report`;
   * `build --json` prints it, then exits 130): its counts, bytes and `tensors` are those of the
   * tensors finished (committed, or skipped) before it stopped.
   */
  interrupted?: true;
  /**
   * Temp files of writers killed mid-write (a staged blob: up to a payload each) this run removed,
   * those gc would remove (store.removeAbandonedTempFiles), and their bytes; 0 on an s3:// cache,
   * whose leftovers `gc --min-age` judges by age.
   */
  temp_files_removed: number;
  temp_bytes_removed: number;
  /**
   * `--repair` found the cache's journal damaged and set it aside (store.recoverDamagedJournal):
   * where it was kept, and from which byte it could not be read; the entries only it held were
   * encoded again by this run. Null otherwise.
   */
  journal_recovered: JournalRecovery | null;
  /**
   * `--repair` found the cache's manifest damaged and salvaged it (store.recoverDamagedManifest):
   * where the damaged bytes were kept, the entries kept and dropped, the bindings dropped (this
   * run bound the model's tensors again; other models' tensors are found by content key at their
   * next load). Null otherwise.
   */
  manifest_recovered: ManifestRecovery | null;
  /** The encode backend that ran. */
  backend: string;
  /** The backend asked for (`--backend`, default `auto`). */
  backend_requested: string;
  /** Why the backend asked for did not start (it fell back to `backend`); null when it ran. */
  fallback_reason: string | null;
  /** Worker threads asked for (--jobs: an upper limit). */
  jobs: number;
  /**
   * Worker threads that ran: at most `jobs`, as many as fit the memory bound (and the tensors to
   * encode); 0 with `jobs` 0, and on a model with at most `inlineMaxBytes` of BF16 to encode.
   */
  workers: number;
  coverage_min: number;
  chunk_size: number;
  elapsed_s: number;
  tensors: BuildTensorReport[];
}

export type BuildProgressEvent =
  | { type: 'start'; tensorCount: number; totalBytes: number; backend: string; jobs: number; workers: number; fallbackReason: string | null }
  | { type: 'tensor'; tensor: BuildTensorReport; doneBytes: number; totalBytes: number; doneTensors: number; tensorCount: number }
  /**
   * The build waits for the cache's writer lock, which another process (`pid` on `host`) has held
   * for `heldMs` (LOCK_WAIT_NOTICE_MS at least); it gives up after `lockTimeoutMs` (LOCK_TIMEOUT).
   * Once per holding of the lock; directory caches only (an s3:// cache has no lock).
   */
  | { type: 'lock-wait'; pid: number; host: string; heldMs: number; lockTimeoutMs: number }
  /** The lock file names no holder (unparseable): the store takes it over once UNPARSEABLE_LOCK_STALE_MS old. */
  | { type: 'lock-unreadable'; heldMs: number }
  /**
   * `--repair` found the manifest damaged: the entries it still lists are checked against their
   * blobs (each decoded) before the build starts; first with done 0, then after each entry.
   */
  | { type: 'manifest-recovery'; done: number; total: number; doneBytes: number; totalBytes: number };

export interface BuildCacheOptions {
  /** A .safetensors file, a directory of shards, a model.safetensors.index.json, or an s3://bucket/prefix holding the shards (and index). */
  model: string;
  /**
   * The cache directory (created if missing), or `s3://bucket/prefix` (the cache and, if missing,
   * the bucket are created; endpoint and credentials from the AWS SDK environment variables).
   */
  cacheDir: string;
  coverageMin?: number | undefined;
  chunkSize?: number | undefined;
  backend?: EncodeBackend | undefined;
  /**
   * Worker threads for calibration, digests and (codec path) encoding, at most (fewer where more
   * would not fit the memory bound: see planBuildMemory); 0: all on the calling thread.
   */
  jobs?: number | undefined;
  /**
   * A model with at most this many bytes of BF16 to encode runs on the calling thread whatever
   * `jobs` says (workers cost more to start than they save on it): default INLINE_MAX_BUILD_BYTES
   * (128 MiB); 0: workers for every model that has a tensor to encode.
   */
  inlineMaxBytes?: number | undefined;
  /**
   * Move a slice key bound to a different entry in the way of this file's binding to this model's
   * tensor: this file's binding from before it changed in place (the same inode), or one without a
   * file stamp (an older release's; every binding of an s3:// cache). Off by default: the build
   * refuses (SLICE_CONFLICT). Other files' bindings of the shard name (other revisions, fine-tunes)
   * are never moved: a directory cache binds this file's beside them (one binding per file, 0.56).
   */
  rebindSlices?: boolean | undefined;
  /**
   * Accepted with `rebindSlices`, no effect since 0.56: it removed a skipped tensor's binding recorded
   * only with other files of its shard name, which are now those files' own bindings (a shard
   * replaced by a new file leaves its old binding to MAX_SLICE_BINDINGS or `gc --model`).
   */
  rebindOtherFiles?: boolean | undefined;
  /**
   * Also check the blob of every tensor already cached (a full read with the store's checks, so a
   * re-run costs a verify's reading) and put back any blob found missing or damaged, from the model
   * (CacheStore.repairBlob). Off by default: a re-run stats each cached tensor's blob only
   * (store.checkBlob), and puts back one missing, of another size, or not a plain file the same way.
   */
  repair?: boolean | undefined;
  /**
   * Skip a BF16 tensor whose payload would not be smaller than its raw bytes (skipped_no_gain):
   * unread where no payload of it can be (under 1,409 values at the default chunk size) and its
   * slice is not bound in the cache, else once calibrated (its escape count). Off by default: the
   * build encodes every BF16 tensor that passes the gate (issue #6), so that a runtime's cacheOnly
   * load of a model whose every tensor is BF16 finds each of them in the cache.
   */
  skipNoGain?: boolean | undefined;
  /**
   * Overrides the slab size (raw bytes plus payloads in flight); at least one largest tensor's.
   * Workers are counted against the bound with this slab (at least one runs, even beyond it).
   */
  maxInFlightBytes?: number | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((event: BuildProgressEvent) => void) | undefined;
  /**
   * Called after large payloads have been written, so that their memory returns at once instead
   * of when V8's heuristics next collect (the heap itself stays tiny, so that can be hundreds of
   * megabytes later). The CLI passes V8's minor GC; without it memory is still bounded, by more.
   */
  collectGarbage?: (() => void) | undefined;
}

export function defaultJobs(): number {
  return Math.max(1, Math.min(availableParallelism(), 8));
}

/**
 * The gate and chunk size of this build: the options where given, else the cache's (its manifest
 * records them when it is created). A gate other than the cache's is refused: `verify --model`
 * and the runtime's reports judge "not cached: coverage" by the cache's gate, so tensors gated
 * differently would read as missing (or cached against it) forever after. A chunk size may differ:
 * each payload records its own.
 */
function isValidChunkSize(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= MIN_CHUNK_SIZE && value <= MAX_CHUNK_SIZE && (value & (value - 1)) === 0;
}

function resolveCacheSettings(options: BuildCacheOptions, store: CacheStore, cacheDir: string): { coverageMin: number; chunkSize: number } {
  if (options.coverageMin !== undefined && options.coverageMin !== store.coverageMin) {
    throw new BuilderError(
      'SETTINGS_MISMATCH',
      `the cache ${cacheDir} gates at coverage ${store.coverageMin}, this build asks ${options.coverageMin}: ` +
        'leave out --coverage-min to use the cache\'s gate, or build into another cache',
      { file: cacheDir, cacheCoverageMin: store.coverageMin, coverageMin: options.coverageMin },
    );
  }
  return { coverageMin: store.coverageMin, chunkSize: options.chunkSize ?? store.chunkSize };
}

/** Builds (or completes) the cache for one model and returns the report. */
const BUILD_CACHE_OPTIONS = optionNamesOf<BuildCacheOptions>({
  model: true,
  cacheDir: true,
  coverageMin: true,
  chunkSize: true,
  backend: true,
  jobs: true,
  inlineMaxBytes: true,
  rebindSlices: true,
  rebindOtherFiles: true,
  skipNoGain: true,
  repair: true,
  maxInFlightBytes: true,
  signal: true,
  onProgress: true,
  collectGarbage: true,
});

export async function buildCache(options: BuildCacheOptions): Promise<BuildReport> {
  const startMs = performance.now();
  checkKnownOptions(options, BUILD_CACHE_OPTIONS, 'buildCache');
  const jobs = options.jobs ?? defaultJobs();
  // Unchecked, NaN made NaN workers: none started and the build waited forever for one.
  if (!Number.isSafeInteger(jobs) || jobs < 0 || jobs > MAX_BUILD_JOBS) {
    throw new BuilderError('USAGE', `jobs must be an integer from 0 to ${MAX_BUILD_JOBS}, got ${String(jobs)}`);
  }
  if (options.maxInFlightBytes !== undefined && !(Number.isSafeInteger(options.maxInFlightBytes) && options.maxInFlightBytes > 0)) {
    throw new BuilderError('USAGE', `maxInFlightBytes must be a positive integer number of bytes, got ${String(options.maxInFlightBytes)}`);
  }
  if (options.skipNoGain !== undefined && typeof options.skipNoGain !== 'boolean') {
    throw new BuilderError('USAGE', `skipNoGain must be a boolean, got ${String(options.skipNoGain)}`);
  }
  const skipNoGain = options.skipNoGain ?? false;
  if (options.rebindOtherFiles !== undefined && typeof options.rebindOtherFiles !== 'boolean') {
    throw new BuilderError('USAGE', `rebindOtherFiles must be a boolean, got ${String(options.rebindOtherFiles)}`);
  }
  if (options.rebindOtherFiles === true && options.rebindSlices !== true) {
    // No effect since 0.56 (other files' bindings are kept); still checked, as scripts pass it.
    throw new BuilderError('USAGE', 'rebindOtherFiles goes with rebindSlices (--rebind-other-files needs --rebind); it has no effect since 0.56');
  }
  if (options.inlineMaxBytes !== undefined && !(options.inlineMaxBytes >= 0 && options.inlineMaxBytes <= Number.MAX_SAFE_INTEGER)) {
    throw new BuilderError('USAGE', `inlineMaxBytes must be a number of bytes (0 or more), got ${String(options.inlineMaxBytes)}`);
  }
  // Checked here, before the cache directory is made: the store refused them only once it was
  // (its INVALID_ARGUMENT, where every other bad option of a build is USAGE).
  if (options.coverageMin !== undefined && !(typeof options.coverageMin === 'number' && options.coverageMin >= 0 && options.coverageMin <= 1)) {
    throw new BuilderError('USAGE', `coverageMin must be a number from 0 to 1, got ${String(options.coverageMin)}`);
  }
  if (options.chunkSize !== undefined && !isValidChunkSize(options.chunkSize)) {
    throw new BuilderError('USAGE', `chunkSize must be a power of two from ${MIN_CHUNK_SIZE} to ${MAX_CHUNK_SIZE}, got ${String(options.chunkSize)}`);
  }
  // Before the cache directory is made: `S3://b/p` was created as a local `./S3:/b/p`, then refused by the store.
  if (looksLikeOtherUrl(options.cacheDir)) {
    throw new BuilderError('USAGE', describeUrlLikeLocation('cacheDir', JSON.stringify(options.cacheDir)), { file: options.cacheDir });
  }
  const signal = options.signal;
  const emit = options.onProgress ?? (() => {});
  throwIfAborted(signal);

  let model: SafetensorsModel | undefined;
  let store: CacheStore | undefined;
  let lockWatch: WriterLockWatch | undefined;
  // What this run committed so far (set once its counters exist), for a failure's error.
  let committedSoFar: (() => BuildCommitted | undefined) | undefined;

  let encoder: ValuesEncoder | undefined;
  // The encoder (under `auto`, the kernels' rule; a probe worker only where the rule may pick a
  // gpu.js backend) starts while the model and the cache open, and the workers that fit any
  // model's memory bound as soon as the model's headers tell whether it has enough BF16 to be
  // worth them (resolveBuildJobs): they start while the cache opens and the first tensors are read
  // and keyed; only calibrating and encoding wait. Once the model is sized the workers get the
  // slab, and as many more start as fit.
  const encoderReady = createValuesEncoder(options.backend ?? 'auto');
  encoderReady.catch(() => {});
  let givePlan: (plan: WorkerPlan) => void = () => {};
  let withholdPlan: (error: Error) => void = () => {};
  const planReady = new Promise<WorkerPlan>((resolve, reject) => {
    givePlan = resolve;
    withholdPlan = reject;
  });
  planReady.catch(() => {}); // jobs 0 never asks for it
  let ready: Promise<TensorProcessor> | null = null;
  try {
    // An s3:// model is read from the object store as the runtime reads it (open-builder-model.ts).
    const s3Model = isS3Url(options.model);
    // An s3:// cache and an s3:// model may share a bucket, one prefix inside the other: refused before any request.
    if (s3Model && isS3Url(options.cacheDir)) checkS3CacheOutsideModel(options.cacheDir, options.model);
    model = (await openBuilderModel(options.model, signal ? { signal } : {})).model;
    const tensors = model.tensors;
    let largestBytes = 0;
    let totalBytes = 0;
    let encodableCount = 0;
    for (const tensor of tensors) {
      if (tensor.dtype === 'BF16' && isCacheableSize(tensor.slice.sizeBytes)) {
        largestBytes = Math.max(largestBytes, tensor.slice.sizeBytes);
        totalBytes += tensor.slice.sizeBytes;
        encodableCount++;
      }
    }
    const workerJobs = resolveBuildJobs(jobs, totalBytes, options.inlineMaxBytes);
    const processorReady = createTensorProcessor({ jobs: workerJobs, startupJobs: countStartupWorkers(workerJobs), plan: planReady });
    processorReady.catch(() => {});
    ready = processorReady;
    // An s3:// cache is no path: nothing to create locally; the store creates the bucket if missing.
    const s3 = isS3Url(options.cacheDir);
    // Only local files can hold a directory cache (an s3:// model's objects cannot).
    if (!s3 && !s3Model) await checkCacheOutsideModel(options.cacheDir, options.model, model);
    if (!s3) await ensureCacheDir(options.cacheDir);
    // Every call that may wait for the writer lock (creating the cache, the sweep, commits, the
    // fold at close) is watched: another writer that keeps it (a stopped build) is reported.
    const watch = s3
      ? undefined
      : watchWriterLock(options.cacheDir, {
          onWait: (holder, heldMs) => emit({ type: 'lock-wait', pid: holder.pid, host: holder.host, heldMs, lockTimeoutMs: DEFAULT_LOCK_TIMEOUT_MS }),
          onUnreadable: (heldMs) => emit({ type: 'lock-unreadable', heldMs }),
        });
    lockWatch = watch;
    const duringLock = <T>(task: Promise<T>, waitingFrom?: Promise<unknown>): Promise<T> => watch?.during(task, waitingFrom) ?? task;
    // A new cache records the options (or the defaults); an existing one keeps its own.
    const created = { coverageMin: options.coverageMin ?? DEFAULT_COVERAGE_MIN, chunkSize: options.chunkSize ?? DEFAULT_CHUNK_SIZE };
    const openStore = (): Promise<CacheStore> =>
      duringLock(
        openCacheStore(options.cacheDir, {
          create: true,
          ...created,
          ...(signal ? { signal } : {}),
          // A slice is bound once per file: revisions and fine-tunes sharing shard names live in one
          // cache, each load served from it (FILE-BINDINGS.md). An s3:// cache adds a binding beside
          // others only for object stamps (an s3:// model's ETags); a local model's stay one per slice.
          ...(s3 ? { s3: { createBucket: true, ...(signal ? { signal } : {}) } } : {}),
          sliceBindingsPerFile: true,
        }),
      ).catch((error: unknown) => {
        throw wrapBuildError(error, { cacheDir: options.cacheDir });
      });
    // --repair: a damaged manifest (which every open refuses) is salvaged first: the entries that
    // still check out are kept, without bindings; this model's tensors are then bound again, and
    // any whose entry was lost are encoded again like any missing tensor.
    // An intact manifest that is an older copy put back beside a newer journal holding commits is
    // recovered the same way (the open would succeed, and the first compaction set those aside).
    let manifestRecovery: ManifestRecovery | null = null;
    if (options.repair === true && !s3) {
      const onProgress = (progress: ManifestRecoveryProgress): void => emit({ type: 'manifest-recovery', ...progress });
      manifestRecovery = await duringLock(recoverDamagedManifest(options.cacheDir, { onProgress, ...(signal ? { signal } : {}) })).catch((error: unknown) => {
        // No cache there yet: the open below makes one.
        if (isStoreError(error) && error.code === 'NOT_A_CACHE') return null;
        throw wrapBuildError(error, { cacheDir: options.cacheDir });
      });
    }
    store = await openStore();
    const { coverageMin, chunkSize } = resolveCacheSettings(options, store, options.cacheDir);
    // Whether the cache is still in the format releases before 0.56 read: the report says when this
    // build takes it past that (its first slice bound for a second file). An s3:// cache's
    // cache.json stays format 2 once moved, also with no second binding held now (layoutFormat).
    const heldSecondBindings = store.holdsSeveralBindings || (s3 && (store as { layoutFormat?: number }).layoutFormat === S3_LAYOUT_FORMAT_PER_FILE);
    // Likewise a directory cache's format 4 (0.57 reads up to 3): an object's binding beside another.
    const heldObjectBindings = !s3 && store.holdsObjectBindingsBeside;
    // --repair: a damaged journal (which every commit would refuse) is set aside first; the
    // entries only it held are then encoded again like any missing tensor.
    const journalRecovery = options.repair === true && store.recoverDamagedJournal ? await duringLock(store.recoverDamagedJournal()).catch((error: unknown) => {
      throw wrapBuildError(error, { cacheDir: options.cacheDir });
    }) : null;
    // Without --repair, a damaged journal fails the build now, as its first commit would: a build
    // with nothing to write commits nothing, and exited 0 over a cache whose unapplied records its
    // loads never see (only verify said so).
    if (options.repair !== true && store.journalDamage !== undefined) throw wrapBuildError(store.journalDamage, { cacheDir: options.cacheDir });
    // A writer killed mid-write (SIGKILL, a crash, a second Ctrl-C) left its staged blobs, up to a
    // payload each, which only a gc removed: the build removes them now, judged as gc judges them,
    // beside its first tensors. The writer lock it takes only when there are some is the one its
    // commits take; behind another writer's lock it leaves them to the next run (sweepTempFiles).
    const sweep = duringLock(sweepTempFiles(store, s3 ? undefined : options.cacheDir));
    sweep.catch(() => {});

    const results: BuildTensorReport[] = new Array(tensors.length);
    // Memory bound: every tensor in flight holds its raw bytes and a buffer for its worst payload
    // in the slab, allocated at admission (so admitted work never waits for memory); the raw
    // bytes go back once encoded, the payload's once committed.
    const sizesOf = (sizeBytes: number): number[] => slabSizesOf(sizeBytes, coverageMin, chunkSize);
    // The slab and the workers share the bound on peak RSS: the slab keeps its size, workers run as
    // far as they fit (jobs is an upper limit).
    const memory: BuildMemoryPlan = planBuildMemory({
      jobs: workerJobs,
      largestBytes,
      tensorCount: encodableCount,
      largestInFlightBytes: slabBytesOf(sizesOf(largestBytes)),
      ...(options.maxInFlightBytes === undefined ? {} : { maxInFlightBytes: options.maxInFlightBytes }),
    });
    // A codec arena shared with the workers where one can be made: they encode in place, and the
    // store checks payloads in place here.
    const slab = createSlabPool(memory.slabBytes, { threads: memory.workers });
    if (memory.workers > 0) givePlan({ slab: slab.buffer, share: (index) => slab.share(index), workers: memory.workers });
    let droppedBytes = 0;
    // Raw tensors held (read, keyed, or waiting for or at a worker): at most what keeps every
    // worker's queue full plus the next being read, so the rest of the slab holds payloads that
    // wait for their write instead of reads far ahead, whose fresh pages cost CPU (~3 ms per MiB
    // here) and do not make the workers any faster.
    const rawHeld = new Set<Uint8Array>();
    const maxRawAhead = Math.max(1, memory.workers) * REQUESTS_PER_WORKER + RAW_READ_AHEAD;
    const releaseRaw = (raw: Uint8Array): void => {
      rawHeld.delete(raw);
      slab.release(raw);
    };

    // Tensor events wait for the start event, which names the backend: it comes once the encoder
    // is ready (a failure to start it fails the build, below).
    const early: BuildProgressEvent[] = [];
    let started = false;
    const startWhenReady = encoderReady.then((value) => {
      encoder = value;
      emit({ type: 'start', tensorCount: tensors.length, totalBytes, backend: value.backend, jobs, workers: memory.workers, fallbackReason: value.fallbackReason });
      started = true;
      for (const event of early.splice(0)) emit(event);
    });
    startWhenReady.catch(() => {});

    let doneBytes = 0;
    let doneTensors = 0;
    const finish = (index: number, report: BuildTensorReport): void => {
      results[index] = report;
      doneTensors++;
      if (options.collectGarbage && droppedBytes >= GC_EVERY_MIN_BYTES) {
        droppedBytes = 0;
        options.collectGarbage();
      }
      if (report.status !== 'skipped_dtype' && report.status !== 'skipped_size') doneBytes += report.sizeBytes;
      const event: BuildProgressEvent = { type: 'tensor', tensor: report, doneBytes, totalBytes, doneTensors, tensorCount: tensors.length };
      if (started) emit(event);
      else early.push(event);
    };

    // Wakes the admission loop when a tensor leaves the in-flight limit: it finished, or it waits
    // only for its alias's commit (context.aliasesInFlight).
    let wakeAdmission: (() => void) | null = null;
    const admissionChange = (): Promise<void> => new Promise((resolve) => (wakeAdmission = resolve));
    const admissionChanged = (): void => {
      const wake = wakeAdmission;
      wakeAdmission = null;
      wake?.();
    };

    // Commits are concurrent: the store merges them into group commits (one record, one fsync).
    const state: { failure: unknown } = { failure: null };
    // Built on the first SLICE_CONFLICT only.
    let bySlice: Map<string, TensorInfo> | undefined;
    const context: TensorContext = {
      model,
      store,
      commits: watchCommits(
        createCommitBatcher(store, {
          rebind: options.rebindSlices ?? false,
          batch: s3,
          onBindingDropped: () => {
            context.droppedBindings++;
          },
        }),
        duringLock,
      ),
      duringLock,
      processor: processorReady,
      encoder: encoderReady,
      keyHolders: new Map(),
      keyTenants: new Map(),
      // Every backend writes the same payload bytes: under `auto`, tensors ready before the probe
      // has answered are encoded by the codec (what the rule picks for encoding on this machine
      // class anyway) instead of waiting for it; a backend asked for by name is waited for.
      encoderNow: () => encoder ?? ((options.backend ?? 'auto') === 'auto' ? codecEncoder : null),
      slab,
      releaseRaw,
      cacheDir: options.cacheDir,
      coverageMin,
      chunkSize,
      rebind: options.rebindSlices ?? false,
      bindingsPerFile: !s3,
      objectBindingsPerFile: s3 && s3Model,
      skipNoGain,
      tensorOfSlice: (shardName, offsetBytes, sizeBytes) => {
        bySlice ??= new Map(tensors.map((t) => [JSON.stringify([t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes]), t]));
        const tensor = bySlice.get(JSON.stringify([shardName, offsetBytes, sizeBytes]));
        return tensor && { name: tensor.name, file: tensor.shardPath };
      },
      // A local model's file stamps: none for an s3:// cache, which keeps file stamps on the host
      // that gives them only (its read-through directory, which the builder has none of), so
      // loaders on every host check the files once anyway. An s3:// model's object stamps
      // (`etag:"…"`) hold on every host: recorded in either cache.
      shardStamps: new Map(s3 && !s3Model ? [] : model.shards.map((shard) => [shard.name, shard.stamp ?? null])),
      repair: options.repair ?? false,
      blobSha256: s3,
      checkFailure() {
        if (state.failure !== null) throw state.failure;
      },
      storedBytes: 0,
      aliased: 0,
      droppedBindings: 0,
      committed: { entries: 0, storedBytes: 0, bindings: 0, stampsAdded: 0, blobsRepaired: 0, repairedBytes: 0, bindingsRemoved: 0 },
      pendingSlices: new Map(),
      aliasesInFlight: 0,
      admissionChanged,
      blobLooks: new Map(),
      dropPayload(bytes) {
        droppedBytes += bytes;
      },
    };
    committedSoFar = () => committedBefore(context);
    // Ctrl-C: stop the workers at once; a commit in progress completes (it is atomic anyway).
    const onAbort = (): void => {
      state.failure ??= buildInterrupted(signal!);
      void processorReady.then((processor) => processor.close()).catch(() => {});
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const active = new Set<Promise<void>>();
    const admissible = (): boolean =>
      active.size - context.aliasesInFlight < MAX_TENSORS_IN_FLIGHT && active.size < MAX_TENSORS_IN_FLIGHT + MAX_ALIASES_IN_FLIGHT && rawHeld.size < maxRawAhead;

    for (let index = 0; index < tensors.length && state.failure === null; index++) {
      const tensor = tensors[index]!;
      const base = baseReport(tensor);
      if (tensor.dtype !== 'BF16') {
        finish(index, { ...base, status: 'skipped_dtype' });
        continue;
      }
      if (!isCacheableSize(tensor.slice.sizeBytes)) {
        finish(index, { ...base, status: 'skipped_size' });
        continue;
      }
      // No payload of it, not even one without escapes, is smaller than its raw bytes: not read,
      // unless its slice is bound (an older build's entry, or a stale binding): that goes through
      // processTensor as any other (cached and its blob looked at, its stamp, --repair, --rebind).
      // An empty tensor's slice is never bound, and reading it costs nothing: it goes through too, so
      // the entry a default build made is cached and its missing blob put back (--repair) as there.
      if (skipNoGain && tensor.slice.sizeBytes > 0 && !canPayloadShrink(tensor.slice.sizeBytes, chunkSize) && context.store.lookupBySlice(tensor.slice.shardName, tensor.slice.offsetBytes, tensor.slice.sizeBytes) === undefined) {
        finish(index, { ...base, status: 'skipped_no_gain' });
        continue;
      }
      const sizes = sizesOf(tensor.slice.sizeBytes);
      let views: Uint8Array[] | null = null;
      while (state.failure === null) {
        if (admissible()) views = slab.tryAcquire(sizes);
        // The slab holds a largest tensor's pair when empty: with nothing in flight this succeeds.
        if (views !== null || active.size === 0) break;
        await Promise.race([admissionChange(), slab.changed()]);
      }
      if (views === null) {
        if (state.failure === null) state.failure = new BuilderError('TENSOR_FAILED', `internal: tensor ${tensor.name} does not fit the build's memory`, { tensor: tensor.name });
        break;
      }
      const [raw, out] = views as [Uint8Array, Uint8Array];
      rawHeld.add(raw);
      if (signal?.aborted) {
        state.failure = buildInterrupted(signal);
        releaseRaw(raw);
        slab.release(out);
        break;
      }
      const task: Promise<void> = processTensor(context, index, tensor, base, signal, raw, out).then(
        (report) => finish(index, report),
        (error: unknown) => {
          state.failure ??= error;
        },
      );
      const tracked = task.finally(() => {
        // Released already unless the tensor failed (idempotent).
        releaseRaw(raw);
        slab.release(out);
        active.delete(tracked);
        admissionChanged();
      });
      active.add(tracked);
    }
    if (state.failure !== null) await processorReady.then((processor) => processor.close()).catch(() => {});
    await Promise.allSettled(active);
    // Every tensor may have been cached or skipped: the report still names the backend.
    if (state.failure === null) await startWhenReady.catch((error: unknown) => (state.failure ??= error));
    signal?.removeEventListener('abort', onAbort);
    if (state.failure === null && signal?.aborted) state.failure = buildInterrupted(signal);
    // The workers the processor started (the plan's count; it resolves once the plan is in).
    const workersRan = async (): Promise<number> => (await processorReady.catch(() => null))?.jobs ?? memory.workers;
    // Asked of the open handle (after every commit of this run, before its close): the close's
    // fold writes what the state holds.
    let movedFormat: boolean | undefined;
    const formatMoved = (): boolean => (movedFormat ??= !heldSecondBindings && store !== undefined && store.holdsSeveralBindings);
    let movedObjectFormat: boolean | undefined;
    const objectFormatMoved = (): boolean => (movedObjectFormat ??= !s3 && !heldObjectBindings && store !== undefined && store.holdsObjectBindingsBeside);
    const report = async (swept: TempFilesReport): Promise<BuildReport> =>
      summarize({
        model: options.model,
        cache: options.cacheDir,
        // Only the tensors finished: an interrupted build's array has holes.
        results: results.filter((result): result is BuildTensorReport => result !== undefined),
        backend: encoder?.backend ?? options.backend ?? 'auto',
        backendRequested: options.backend ?? 'auto',
        fallbackReason: encoder?.fallbackReason ?? null,
        jobs,
        workers: await workersRan(),
        coverageMin,
        chunkSize,
        elapsedS: (performance.now() - startMs) / 1000,
        storedBytes: context.storedBytes,
        aliased: context.aliased,
        droppedBindings: context.droppedBindings,
        formatMoved: formatMoved(),
        objectFormatMoved: objectFormatMoved(),
        swept,
        journalRecovery,
        manifestRecovery,
      });
    if (state.failure !== null) {
      const failure = state.failure;
      // Stopped at a safe point: what it finished is committed, and `build --json` prints this
      // report of it (it printed nothing) before the error line and exit 130.
      // Any other failure says what it committed (the catch below).
      if (isBuilderError(failure, 'INTERRUPTED')) failure.context.report = { interrupted: true, ...(await report(await sweep.catch(() => NO_TEMP_FILES))) };
      throw failure;
    }
    // Every tensor is committed. Closing folds the journal into the manifest (what the seed's
    // readers read): its failure is the build's (exit 1, the cache stays valid and the next
    // writer finishes the fold), not a silent success.
    formatMoved();
    objectFormatMoved();
    const closing = store;
    store = undefined;
    // A run that stored nothing (every tensor cached) still brings manifest.json up to date when an
    // earlier writer's fold did not happen (its close failed on a full disk, or it kept it off). A
    // run that wrote has its close fold everything: a compact() here would take the lock twice.
    const wroteNothing = context.storedBytes === 0 && context.aliased === 0;
    const swept = await sweep;
    try {
      if (wroteNothing && closing.needsCompaction) await duringLock(closing.compact());
      await duringLock(closing.close());
    } catch (error) {
      // Ctrl-C while the fold waited for another writer's lock: every tensor is committed (the next
      // writer folds), so this is a build stopped at a safe point, with its report, as any other.
      if (!signal?.aborted || !isStoreError(error, 'ABORTED')) throw error;
      await closing.close().catch(() => undefined);
      const failure = buildInterrupted(signal);
      failure.context.report = { interrupted: true, ...(await report(swept)) };
      throw failure;
    }
    return await report(swept);
  } catch (error) {
    const failure = wrapBuildError(error, { cacheDir: options.cacheDir });
    // Any failure but an interruption (whose report says it all) says what the tensors before it
    // committed: they stay in the cache, which changed although the build failed (user probe p3: a
    // SLICE_CONFLICT at a later shard; a lock or S3 failure mid-build, a fold failing once every
    // tensor is committed alike). Put on after wrapping: a wrap makes a new error.
    if (!isBuilderError(failure, 'INTERRUPTED')) attachCommitted(failure, committedSoFar?.());
    throw failure;
  } finally {
    lockWatch?.stop();
    withholdPlan(new BuilderError('INTERRUPTED', 'the build ended before its workers got work'));
    await ready?.then((processor) => processor.close()).catch(() => {});
    await (encoder ?? (await encoderReady.catch(() => undefined)))?.dispose().catch(() => {});
    await store?.close().catch(() => {});
    await model?.close().catch(() => {});
  }
}

/**
 * store.removeAbandonedTempFiles (directory caches): what it removed. Another writer holding the
 * lock (`cacheDir`'s lock file names a live one) is no failure of the build, and the files stay for
 * the next run or a gc: the sweep is skipped, not waited for. It waited for the lock (the store's
 * SWEEP_LOCK_WAIT_MS, before 2026-12-05 the whole lock timeout) holding the store's writer mutex,
 * and the commits' whole lock timeout began only after it: a build behind a stopped writer waited
 * for the lock longer than LOCK_TIMEOUT's waitedMs and message said (61 s against 30 s). Its
 * LOCK_TIMEOUT (a writer that took the lock just after the look) is no failure either.
 */
async function sweepTempFiles(store: CacheStore, cacheDir: string | undefined): Promise<TempFilesReport> {
  try {
    if (cacheDir !== undefined && (await isWriterLockHeldElsewhere(cacheDir))) return NO_TEMP_FILES;
    return (await store.removeAbandonedTempFiles?.()) ?? NO_TEMP_FILES;
  } catch (error) {
    // ABORTED: Ctrl-C while waiting for that writer; the build's own steps say so.
    if (isStoreError(error, 'LOCK_TIMEOUT') || isStoreError(error, 'ABORTED')) return NO_TEMP_FILES;
    throw error;
  }
}

const NO_TEMP_FILES: TempFilesReport = { tempFiles: [], tempBytes: 0 };

/**
 * The batcher's calls with the writer lock watched while each waits for it: an alias at once; an
 * entry once its payload is in its staged blob file (the store's onPayloadWritten: the store
 * writes and fsyncs the blob, then asks for the lock), so another writer's holding while a large
 * payload is written is not reported as a wait. (The fsync after the write is still counted: the
 * store has no hook for the lock request itself.)
 */
export function watchCommits(commits: CommitBatcher, duringLock: <T>(task: Promise<T>, waitingFrom?: Promise<unknown>) => Promise<T>): CommitBatcher {
  return {
    addEntry: (input) => {
      let markWritten!: () => void;
      const written = new Promise<void>((resolve) => (markWritten = resolve));
      const onPayloadWritten = input.onPayloadWritten;
      const task = commits.addEntry({
        ...input,
        onPayloadWritten: () => {
          markWritten();
          onPayloadWritten?.();
        },
      });
      return duringLock(task, written);
    },
    aliasSlice: (item) => duringLock(commits.aliasSlice(item)),
    unbindSlice: (item) => duringLock(commits.unbindSlice(item)),
  };
}

interface TensorContext {
  model: SafetensorsModel;
  store: CacheStore;
  /** Every write of the build goes through here (group commit: one store call per batch). */
  commits: CommitBatcher;
  /** Watches the writer lock while a store call that may take it is pending (WriterLockWatch.during). */
  duringLock<T>(task: Promise<T>): Promise<T>;
  /** Started with the build; awaited only by the first tensor that needs calibrating. */
  processor: Promise<TensorProcessor>;
  /** Likewise for the first tensor to encode. */
  encoder: Promise<ValuesEncoder>;
  /**
   * Tensors in flight by content key (model index, settled when that tensor is done): of identical
   * tensors the first in model order is encoded, the others wait for it and alias its entry, so the
   * report does not depend on timing and nothing is encoded twice.
   */
  keyHolders: Map<string, { index: number; done: Promise<void> }[]>;
  /**
   * The same, held until the tensor is done, also while it stores anew a tensor whose entry went
   * (storeGoneTensor: keyHolders gave its key back by then, a wait there could hold up the slab).
   */
  keyTenants: Map<string, { index: number; done: Promise<void> }[]>;
  /** The encoder to use without waiting, if any. */
  encoderNow(): ValuesEncoder | null;
  slab: SlabPool;
  /** Gives a tensor's raw bytes back to the slab (and lets the next tensor be read). */
  releaseRaw(raw: Uint8Array): void;
  cacheDir: string;
  coverageMin: number;
  chunkSize: number;
  rebind: boolean;
  /** The store binds a slice once per file (a directory cache): other files' bindings are not in the way (judge-slice-bindings.ts). */
  bindingsPerFile: boolean;
  /**
   * An s3:// cache and an s3:// model: a binding recorded with other objects' stamps (another
   * revision's ETags) is not in the way; this object's binding goes beside it (FILE-BINDINGS.md, phase 2).
   */
  objectBindingsPerFile: boolean;
  /** BuildCacheOptions.skipNoGain. */
  skipNoGain: boolean;
  /** The model's tensor at a slice key (a store SLICE_CONFLICT names the slice, not the tensor). */
  tensorOfSlice(shardName: string, offsetBytes: number, sizeBytes: number): { name: string; file: string } | undefined;
  /** Each shard's stamp by shard name (SafetensorsShard.stamp), recorded with the slices bound. */
  shardStamps: ReadonlyMap<string, string | null>;
  /** Read every cached tensor's blob and put back damaged ones (BuildCacheOptions.repair); else only stat it. */
  repair: boolean;
  /**
   * Record each blob's SHA-256 (hashed on the worker that encoded it): an s3:// cache only, whose
   * object names carry it. A local cache rests on the payload's XXH32, which covers every byte and
   * the store checks on every read; the SHA-256 was 20 % of a build's CPU stages (bench/run-bench.mjs).
   */
  blobSha256: boolean;
  /** Throws the build's first failure: no commit starts after one. */
  checkFailure(): void;
  storedBytes: number;
  aliased: number;
  /** Bindings of other files this run's commits dropped past MAX_SLICE_BINDINGS (BuildReport.dropped_bindings). */
  droppedBindings: number;
  /**
   * What this run committed so far, each kind counted at its commit (a failed build reports it):
   * `bindings` and `stampsAdded` split `aliased`; `storedBytes` here leaves out the blobs put back,
   * which the context's storedBytes counts.
   */
  committed: BuildCommitted;
  /** New bindings of each entry this run has asked for and not seen answered yet. */
  pendingSlices: Map<string, PendingSlices>;
  /** Cached tensors waiting for their alias's commit only, outside MAX_TENSORS_IN_FLIGHT (MAX_ALIASES_IN_FLIGHT). */
  aliasesInFlight: number;
  /** Tells the admission loop that a tensor left the in-flight limit. */
  admissionChanged(): void;
  /** The look at each cached entry's blob this run made, by content key (lookAtBlobOnce). */
  blobLooks: Map<string, Promise<BlobRepair>>;
  /** Counts payload bytes left to the GC (encoders that allocate their own payloads). */
  dropPayload(bytes: number): void;
}

interface PendingSlices {
  count: number;
  /** Tensors waiting for one of them to be answered (bindSlice). */
  waiting: (() => void)[];
}

type BaseReport = Omit<BuildTensorReport, 'status'>;

function baseReport(tensor: TensorInfo): BaseReport {
  return {
    name: tensor.name,
    key: null,
    shard: tensor.slice.shardName,
    offsetBytes: tensor.slice.offsetBytes,
    sizeBytes: tensor.slice.sizeBytes,
    dtype: tensor.dtype,
    shape: [...tensor.shape],
    coverage: null,
    compBytes: null,
  };
}

/**
 * One BF16 tensor: read into `raw`, content key, then alias an existing entry, or calibrate and
 * encode into `out` (a worker) and store. `raw` and `out` are its slab views: each goes back as
 * soon as it is no longer needed (the caller releases whatever is left when it fails).
 */
async function processTensor(
  context: TensorContext,
  index: number,
  tensor: TensorInfo,
  base: BaseReport,
  signal: AbortSignal | undefined,
  raw: Uint8Array,
  out: Uint8Array,
): Promise<BuildTensorReport> {
  try {
    const bytes = await readTensorBytes(context.model, tensor, raw);
    throwIfAborted(signal);
    // The content key on a worker (one SHA-1 pass: the main thread's largest job otherwise);
    // the store, here, then decides whether the tensor needs calibrating at all.
    const key = await (await context.processor).computeKey(bytes, tensor.shape);
    throwIfAborted(signal);
    // A binding in the way refuses the tensor, bound or skipped (a skipped one's stale binding would
    // stay: unbindStaleSlice removes it only with --rebind); other files' bindings never do.
    checkSliceConflict(context, key, tensor, 'may-skip');
    const withKey = { ...base, key };
    const releaseKey = joinKeyGroup(context.keyHolders, key, index);
    const leaveTenants = joinKeyGroup(context.keyTenants, key, index);
    try {
      return await processKeyedTensor(context, index, tensor, signal, raw, out, bytes, key, withKey, releaseKey);
    } finally {
      releaseKey();
      leaveTenants();
    }
  } catch (error) {
    throw wrapBuildError(error, { tensor: tensor.name, file: tensor.shardPath, cacheDir: context.cacheDir, rebind: context.rebind, tensorOfSlice: context.tensorOfSlice });
  }
}

/** Waits until no tensor earlier in the model with this content key is in flight. */
function waitForEarlierHolders(context: TensorContext, key: string, index: number): Promise<void> {
  return waitForEarlierInGroup(context.keyHolders, key, index);
}

/** Waits until `group` holds no tensor of `key` earlier in the model than `index`. */
async function waitForEarlierInGroup(group: Map<string, { index: number; done: Promise<void> }[]>, key: string, index: number): Promise<void> {
  for (;;) {
    const earlier = group.get(key)?.find((member) => member.index < index);
    if (!earlier) return;
    await earlier.done;
  }
}

/** Puts the tensor at `index` in `group` under `key`; the function returned takes it out (once). */
function joinKeyGroup(group: Map<string, { index: number; done: Promise<void> }[]>, key: string, index: number): () => void {
  let settle = (): void => {};
  const members = group.get(key) ?? [];
  const member = { index, done: new Promise<void>((resolve) => (settle = resolve)) };
  members.push(member);
  group.set(key, members);
  let joined = true;
  return () => {
    if (!joined) return;
    joined = false;
    members.splice(members.indexOf(member), 1);
    if (members.length === 0) group.delete(key);
    settle();
  };
}

/**
 * processTensor once the content key is known (`key` is registered in keyHolders). An entry this
 * run found that went from the cache before the tensor was bound to it (EntryGone: a `gc
 * --drop-unbound-entries` beside the build) makes the tensor a miss: stored again (storeGoneTensor).
 */
async function processKeyedTensor(
  context: TensorContext,
  index: number,
  tensor: TensorInfo,
  signal: AbortSignal | undefined,
  raw: Uint8Array,
  out: Uint8Array,
  bytes: Uint8Array,
  key: string,
  withKey: BaseReport,
  releaseKey: () => void,
): Promise<BuildTensorReport> {
  try {
    return await aliasOrStoreTensor(context, index, tensor, signal, raw, out, bytes, key, withKey, releaseKey);
  } catch (error) {
    if (!(error instanceof EntryGone)) throw error;
    // Its slab views went back as the attempt ended. The key goes too before any wait for new ones:
    // an identical tensor waiting for it may hold the slab room they need.
    releaseKey();
    // The look at the gone entry's blob (failed, or of a blob since unlinked) says nothing of a new one.
    context.blobLooks.delete(key);
    // A blob this run put back went with the entry: its bytes are not in the cache, the ones
    // stored anew are (counted once, by the store below); the tensor still says it was put back.
    context.storedBytes -= error.repaired.bytes;
    countRepairedBlob(context, error.repaired, -1);
    return await storeGoneTensor(context, index, tensor, signal, key, withKey, error.repaired);
  }
}

/**
 * The tensor's entry was in the cache when this run looked it up, and went before the build bound
 * its slice: a `gc --drop-unbound-entries` removed it as bound to nothing (the store's alias then
 * answers false). Only thrown once a refresh finds no entry of the key (isEntryGone);
 * processKeyedTensor catches it. (One gone before its blob was put back, repairBlob's
 * ENTRY_NOT_FOUND, is no EntryGone: aliasOrStoreTensor stores it as a miss with the views at hand.)
 */
class EntryGone extends Error {
  /** The blob this run had put back for the entry before it went (counted in storedBytes), if any. */
  repaired: BlobRepair = NOT_REPAIRED;

  constructor(readonly key: string) {
    super(`entry ${key} went from the cache`);
  }
}

/** Whether the store, caught up, holds no entry of `key` (a false alias or ENTRY_NOT_FOUND of a gone entry). */
async function isEntryGone(context: TensorContext, key: string): Promise<boolean> {
  await context.store.refresh();
  return context.store.getEntry(key) === undefined;
}

/**
 * A tensor whose entry went from the cache after this run found it (EntryGone), stored as a miss:
 * read again into new slab views (the first ones went back with the attempt), its content key
 * checked against the one found (the file may have been rewritten since), encoded and added with its
 * slice. Identical tensors earlier in the model finish first: of those whose entry went, the first
 * in model order stores it again (`encoded`), each later one finds it stored and binds its slice
 * (`cached`), so the report does not depend on timing (one keyed only after the entry went, later
 * in the model, may still store it first: it waits for no gone tensor). `repair`: the blob this run
 * had put back before the entry went (the report keeps `repaired`). Once only: an entry that goes
 * again fails the build.
 */
async function storeGoneTensor(
  context: TensorContext,
  index: number,
  tensor: TensorInfo,
  signal: AbortSignal | undefined,
  key: string,
  withKey: BaseReport,
  repair: BlobRepair,
): Promise<BuildTensorReport> {
  const repairedFields = repair.bytes > 0 ? { repaired: true as const, ...(repair.was === null ? {} : { repairedBlob: repair.was }) } : {};
  let views: Uint8Array[] | undefined;
  try {
    // Waited for holding no slab views: an earlier gone one may need room for its own. They never
    // wait for a later tensor (keyHolders and this wait go by model order), so this ends.
    await waitForEarlierInGroup(context.keyTenants, key, index);
    throwIfAborted(signal);
    if (context.store.getEntry(key) === undefined) views = await acquireSlabViews(context, slabSizesOf(tensor.slice.sizeBytes, context.coverageMin, context.chunkSize));
    // Looked up again with the views held: an identical tensor of this run stored it meanwhile (or
    // another writer did). Bound to that entry, nothing read or encoded again.
    const stored = context.store.getEntry(key);
    if (stored) {
      releaseSlabViews(context, views);
      context.checkFailure();
      const bound = await bindSlice(context, key, tensor);
      return { ...withKey, status: 'cached', coverage: entryCoverage(stored), compBytes: stored.compBytes, ...repairedFields, ...bound };
    }
    const [raw, out] = views as [Uint8Array, Uint8Array];
    const bytes = await readTensorBytes(context.model, tensor, raw);
    throwIfAborted(signal);
    if ((await (await context.processor).computeKey(bytes, tensor.shape)) !== key) {
      throw new BuilderError(
        'MODEL_CHANGED',
        `MODEL_CHANGED: ${tensor.shardPath} was rewritten while the build read it (tensor ${tensor.name} read again holds other bytes); ` +
          'entries committed so far stay valid: run the build again once the model is no longer being written',
        { file: tensor.shardPath, tensor: tensor.name },
      );
    }
    return { ...(await encodeAndStoreTensor(context, index, tensor, signal, raw, out, bytes, key, withKey, () => {})), ...repairedFields };
  } catch (error) {
    if (!(error instanceof EntryGone)) throw error;
    // Stored anew with its slice in one commit, an entry is bound: a drop removes it again only
    // where that binding was not made with it (another writer added the key unbound first, or the
    // slice was held by another entry, which --rebind then moves it from in a commit of its own).
    throw new BuilderError(
      'NOT_WRITABLE',
      `entry ${key} of tensor ${tensor.name} went from the cache twice while this build stored it: a gc --drop-unbound-entries ` +
        'beside the build removed it as bound to no slice, and again before this build bound the slice to it once stored anew ' +
        '(another writer had added the entry without a binding first, or --rebind was moving the slice from another entry); ' +
        'entries committed so far stay valid: run the build again once the gc has finished',
      { tensor: tensor.name, file: context.cacheDir },
    );
  } finally {
    releaseSlabViews(context, views);
  }
}

/** Gives back storeGoneTensor's views, if it took them (a second release is a no-op). */
function releaseSlabViews(context: TensorContext, views: Uint8Array[] | undefined): void {
  if (views === undefined) return;
  context.releaseRaw(views[0]!);
  context.slab.release(views[1]!);
}

/**
 * Slab views of these sizes, waiting for room (tensors in flight give theirs back as they finish;
 * an empty slab always holds a tensor's pair). For storeGoneTensor only: admission takes the
 * views of every other tensor.
 */
async function acquireSlabViews(context: TensorContext, sizes: readonly number[]): Promise<Uint8Array[]> {
  for (;;) {
    context.checkFailure();
    const views = context.slab.tryAcquire(sizes);
    if (views !== null) return views;
    await context.slab.changed();
  }
}

/** processKeyedTensor's attempt: a cached tensor is aliased (its blob looked at first), a new one encoded and stored. */
async function aliasOrStoreTensor(
  context: TensorContext,
  index: number,
  tensor: TensorInfo,
  signal: AbortSignal | undefined,
  raw: Uint8Array,
  out: Uint8Array,
  bytes: Uint8Array,
  key: string,
  withKey: BaseReport,
  releaseKey: () => void,
): Promise<BuildTensorReport> {
  const { store, slab, releaseRaw } = context;
  await waitForEarlierHolders(context, key, index);
  throwIfAborted(signal);
  const existing = store.getEntry(key);
  if (existing) {
    // Cached, so bound below: a binding in the way another writer made since processTensor looked refuses it now.
    checkSliceConflict(context, key, tensor);
    let repaired: BlobRepair | undefined;
    let gone = false;
    try {
      context.checkFailure();
      // --repair reads the blob whole; every build stats it (a copy of a cache may lack blobs its journal names).
      repaired = await lookAtBlobOnce(context, key, () =>
        context.repair ? context.duringLock(repairCachedBlob(store, existing, bytes, out)) : checkCachedBlob(store, existing, bytes, context.duringLock),
      );
    } catch (error) {
      // Its blob was unlinked with the entry (a gc --drop-unbound-entries since the lookup): a miss.
      if (!(isStoreError(error, 'ENTRY_NOT_FOUND') && (await isEntryGone(context, key)))) throw error;
      gone = true;
    } finally {
      if (!gone) {
        releaseRaw(raw);
        slab.release(out);
      }
    }
    if (repaired === undefined) {
      // Stored as any miss, from the bytes and views at hand, the key still held: identical tensors
      // behind this one wait for it and bind its new entry (the first in model order is encoded).
      // The failed look says nothing of the new blob.
      context.blobLooks.delete(key);
      return await encodeAndStoreTensor(context, index, tensor, signal, raw, out, bytes, key, withKey, releaseKey);
    }
    context.storedBytes += repaired.bytes;
    countRepairedBlob(context, repaired, 1);
    context.checkFailure();
    // The entry is committed and its blob looked at: identical tensors behind this one go on now,
    // so their aliases are in flight together (one journal record and fsync for all of them)
    // rather than each waiting for the one before it to commit.
    releaseKey();
    // Holding no slab memory and no payload, this tensor leaves the in-flight limit while its alias
    // commits: the next tensors are read meanwhile, and their aliases join the next commit.
    context.aliasesInFlight++;
    context.admissionChanged();
    let bound: SliceOutcome;
    try {
      bound = await bindSlice(context, key, tensor);
    } catch (error) {
      // The blob put back went with the entry (processKeyedTensor takes it out of storedBytes).
      if (error instanceof EntryGone) error.repaired = repaired;
      throw error;
    } finally {
      context.aliasesInFlight--;
    }
    return {
      ...withKey,
      status: 'cached',
      coverage: entryCoverage(existing),
      compBytes: existing.compBytes,
      ...(repaired.bytes > 0 ? { repaired: true as const, ...(repaired.was === null ? {} : { repairedBlob: repaired.was }) } : {}),
      ...bound,
    };
  }
  return await encodeAndStoreTensor(context, index, tensor, signal, raw, out, bytes, key, withKey, releaseKey);
}

/** A tensor not cached when looked up: calibrated (the gate), encoded into `out`, and stored with its slice. */
async function encodeAndStoreTensor(
  context: TensorContext,
  index: number,
  tensor: TensorInfo,
  signal: AbortSignal | undefined,
  raw: Uint8Array,
  out: Uint8Array,
  bytes: Uint8Array,
  key: string,
  withKey: BaseReport,
  releaseKey: () => void,
): Promise<BuildTensorReport> {
  const { store, slab, releaseRaw } = context;
  const { sizeBytes } = tensor.slice;
  const processor = await context.processor;
  const encoder = context.encoderNow() ?? (await context.encoder);
  // The codec encodes on the workers, straight into `out`; gpu.js kernels live on this thread.
  const into = encoder.isCodec ? { out, chunkSize: context.chunkSize, digest: context.blobSha256 } : undefined;
  const calibrated = await processor.calibrate(bytes, context.coverageMin, into);
  const { coverage, exponents } = calibrated;
  // In the order of the unread skip above: no payload of it can shrink, then the gate, then its escapes
  // (the codec path has encoded it already: wasted, but small). A skipped tensor's slice bound to
  // other bytes in the way is removed under --rebind (unbindStaleSlice); other files' are kept.
  if (context.skipNoGain && !canPayloadShrink(sizeBytes, context.chunkSize)) return { ...withKey, coverage, status: 'skipped_no_gain', ...(await unbindStaleSlice(context, key, tensor)) };
  if (exponents === null) return { ...withKey, coverage, status: 'skipped_coverage', ...(await unbindStaleSlice(context, key, tensor)) };
  if (context.skipNoGain && !isPayloadSmaller(sizeBytes, calibrated.escapeCount, context.chunkSize)) {
    return { ...withKey, coverage, status: 'skipped_no_gain', ...(await unbindStaleSlice(context, key, tensor)) };
  }
  // Not skipped, so bound below: a binding in the way another writer made since processTensor looked refuses it.
  checkSliceConflict(context, key, tensor);
  context.checkFailure();
  const payload = calibrated.payload ?? (await encoder.encode(viewBf16(bytes), exponents, context.chunkSize));
  // The raw bytes are free: only the payload stays in flight while it is written.
  releaseRaw(raw);
  if (!calibrated.payload) slab.release(out);
  try {
    // An identical tensor earlier in the model may have got its key later than this one.
    await waitForEarlierHolders(context, key, index);
    const stored = store.getEntry(key);
    if (stored) {
      context.checkFailure();
      releaseKey();
      const bound = await bindSlice(context, key, tensor);
      return { ...withKey, status: 'cached', coverage: entryCoverage(stored), compBytes: stored.compBytes, ...bound };
    }
    context.checkFailure();
    // The slice goes in the same commit as the entry when nothing is in the way (the usual case:
    // unbound, or bound for other files only, which a directory cache binds it beside); a zero-byte
    // slice is never aliased (bindSlice says why).
    const sliceFree = sizeBytes > 0 && judgeSlice(context, key, tensor).inTheWay.length === 0;
    const { added, slicesBound, droppedBindings } = await context.commits.addEntry({
      key,
      qualname: qualnameOf(tensor.name),
      payload,
      shape: [...tensor.shape],
      dtype: 'BF16',
      // Hashed by the worker that encoded it; the store accepts it only for this very payload.
      ...(calibrated.payload && calibrated.payloadDigest ? { payloadDigest: calibrated.payloadDigest } : {}),
      ...(context.blobSha256 ? {} : { recordBlobSha256: false }),
      // Free when looked at, but another writer may bind it before this commit (a concurrent build
      // of a model with the same shard names): then it is left out and bindSlice below decides, by
      // --rebind, as it would have had the binding been seen here (it failed SLICE_CONFLICT, even
      // with --rebind).
      ...(sliceFree ? { sliceKeys: [sliceKeyOf(context, tensor)], leaveTakenSlices: true } : {}),
      // The payload's slab room goes back once its bytes are in the file, not after the fsync,
      // rename and journal record: the next tensors reuse that (already touched) memory meanwhile.
      ...(calibrated.payload ? { onPayloadWritten: () => slab.release(out) } : {}),
    });
    if (added) {
      context.storedBytes += payload.byteLength;
      context.committed.entries++;
      context.committed.storedBytes += payload.byteLength;
    }
    let bound: SliceOutcome = {};
    // Not added: another writer committed the key first (a concurrent build of a model sharing the
    // tensor). An s3:// store then binds the still-free slice in this very commit (slicesBound): this
    // run's binding all the same (uncounted before: `aliased` came out short under concurrent builds).
    if (sliceFree && slicesBound > 0) {
      context.aliased++;
      context.committed.bindings++;
    } else if (sliceFree && droppedBindings?.some((dropped) => dropped.key === key && sameSlice(dropped.slice, tensor.slice)) === true) {
      // Its binding ranked least recent past MAX_SLICE_BINDINGS (the store added the entry without
      // it, and reported the drop): an alias now would be outranked again, and counted twice.
      releaseKey();
      bound = { bindingDropped: true };
    } else {
      releaseKey();
      bound = await bindSlice(context, key, tensor);
    }
    // An identical tensor of this run may have been committed first: then this one is 'cached'.
    return { ...withKey, coverage, status: added ? 'encoded' : 'cached', compBytes: payload.byteLength, ...bound };
  } finally {
    // The store has written (or refused) the payload and keeps no reference to it (released
    // already where onPayloadWritten ran; a second release is a no-op).
    if (calibrated.payload) slab.release(out);
    else context.dropPayload(payload.byteLength);
  }
}

/**
 * Looks at an entry's blob (`look`) once per run: identical tensors keyed at the same moment on two
 * workers each found a missing blob and each put it back (counted twice, written twice). A later
 * tensor of the same entry waits for the first look and reports nothing put back.
 */
async function lookAtBlobOnce(context: TensorContext, key: string, look: () => Promise<BlobRepair>): Promise<BlobRepair> {
  const earlier = context.blobLooks.get(key);
  if (earlier) {
    await earlier;
    return NOT_REPAIRED;
  }
  const task = look();
  context.blobLooks.set(key, task);
  return await task;
}

/** Top-16 coverage of a cached tensor, from its payload meta: the values that are not escapes. */
function entryCoverage(entry: CacheEntry): number {
  const { elementCount, escapeCount } = entry.meta;
  return elementCount > 0 ? (elementCount - escapeCount) / elementCount : 1;
}

/**
 * The entry's qualname: the tensor's name, cut to the store's MAX_QUALNAME_CHARS (a label only:
 * entries are found by content and slice keys), so a valid file with a longer name still builds.
 */
function qualnameOf(tensorName: string): string {
  // A lone surrogate is no UTF-8, and strict JSON readers of manifest.json (serde_json, Python's with
  // errors='strict') refuse it. The safetensors reader refuses a header naming one; this UTF-8 round
  // trip (U+FFFD in its place) keeps any other source of names from writing one.
  const name = Buffer.from(tensorName, 'utf8').toString('utf8');
  if (name.length <= MAX_QUALNAME_CHARS) return name;
  let end = MAX_QUALNAME_CHARS - 1;
  // Never between the halves of a surrogate pair (a lone half, as above).
  const last = name.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${name.slice(0, end)}…`;
}

/** The tensor's slice key with its shard's stamp (SafetensorsShard.stamp), as bindings record it. */
function sliceKeyOf(context: TensorContext, tensor: TensorInfo): SliceKeyTuple {
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const stamp = context.shardStamps.get(shardName) ?? undefined;
  return stamp === undefined ? [shardName, offsetBytes, sizeBytes] : [shardName, offsetBytes, sizeBytes, [stamp]];
}

/** Whether a slice key names the tensor's slice (its stamps aside). */
function sameSlice(slice: SliceKeyTuple, tensorSlice: TensorInfo['slice']): boolean {
  return slice[0] === tensorSlice.shardName && slice[1] === tensorSlice.offsetBytes && slice[2] === tensorSlice.sizeBytes;
}

/** The slice's bindings for this tensor's file and entry (judge-slice-bindings.ts). */
function judgeSlice(context: TensorContext, key: string, tensor: TensorInfo): JudgedSliceBindings {
  const perFile = context.bindingsPerFile ? 'file' : context.objectBindingsPerFile ? 'object' : false;
  return judgeSliceBindings(context.store, tensor.slice, key, context.shardStamps.get(tensor.slice.shardName) ?? null, perFile);
}

/**
 * Refuses early (before anything is written) a slice bound to other bytes in the way of this file's
 * binding, unless rebinding: this file's own binding before it changed in place, or one without a
 * file stamp (every binding of an s3:// cache). Another file's binding (another revision's, a
 * fine-tune's) is not in the way in a directory cache: this file's binding goes beside it.
 */
function checkSliceConflict(context: TensorContext, key: string, tensor: TensorInfo, mode: 'binds' | 'may-skip' = 'binds'): void {
  // The store would refuse the alias too (SLICE_CONFLICT), or (this file changed in place) bind it
  // beside its stale binding, which today's rule refuses; failing here writes nothing first.
  if (tensor.slice.sizeBytes === 0) return;
  const judged = judgeSlice(context, key, tensor);
  // A directory cache where other files or objects bound the slice beside a binding with no stamp:
  // the store binds nothing beside that one, and its rebind would move theirs, which are not this
  // build's to move, --rebind or not. ('may-skip': a tensor then skipped binds nothing, so nothing
  // is refused for it.)
  if (mode === 'binds' && context.bindingsPerFile && isBesideRefused(judged, stampOf(context, tensor))) {
    const stampless = judged.inTheWay.filter((binding) => binding.stamps.length === 0);
    throw sliceConflictError(tensor.name, tensor.shardPath, undefined, { besideRefused: true, binding: conflictingBinding(context, tensor, stampless.length > 0 ? stampless : judged.otherFiles) });
  }
  if (context.rebind || judged.own !== undefined || judged.inTheWay.length === 0) return;
  throw sliceConflictError(tensor.name, tensor.shardPath, undefined, { s3: !context.bindingsPerFile, binding: conflictingBinding(context, tensor, judged.inTheWay) });
}

function stampOf(context: TensorContext, tensor: TensorInfo): string | null {
  return context.shardStamps.get(tensor.slice.shardName) ?? null;
}

/** The first binding in the way, with this file's stamp, for the SLICE_CONFLICT's message and context. */
function conflictingBinding(context: TensorContext, tensor: TensorInfo, inTheWay: readonly SliceBinding[]): ConflictingBinding {
  const binding = inTheWay[0]!;
  return { key: binding.entry.key, stamps: binding.stamps, stamp: context.shardStamps.get(tensor.slice.shardName) ?? null };
}

/** What bindSlice did besides binding, for the tensor's report (BuildTensorReport). */
type SliceOutcome = Pick<BuildTensorReport, 'unaliased' | 'unboundFrom' | 'bindingDropped'>;

/**
 * Binds the tensor's slice key to its entry unless it already is. A slice bound to another entry in
 * the way (this file before it changed in place, a binding without file stamps) is a conflict the
 * store refuses; `rebind` moves it, since the bytes just read are what the file holds now. Other
 * files' bindings stay: a directory cache binds this file's beside them.
 */
async function bindSlice(context: TensorContext, key: string, tensor: TensorInfo, attempt = 1): Promise<SliceOutcome> {
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  // A zero-byte slice names no bytes: empty tensors next to each other share it, whatever their
  // shape or dtype, so it identifies none of them. Not aliased; the entry is found by content key,
  // and a loader has nothing to read for it anyway. (Aliasing the first one made the next, of
  // another shape, a SLICE_CONFLICT when both were in one commit batch.)
  if (sizeBytes === 0) return {};
  const stamp = context.shardStamps.get(shardName) ?? undefined;
  let pending: PendingSlices | undefined;
  // Only a file stamp added to the binding the slice has to this entry: no new binding (BuildCommitted).
  let stampOnly = false;
  let judged: JudgedSliceBindings;
  for (;;) {
    judged = judgeSlice(context, key, tensor);
    const own = judged.own;
    // Bound here already; a binding without this file's stamp (a copy of the file, a rewrite with
    // the same bytes, another model's file of this name) gets it added: these bytes were just hashed.
    // A binding in the way beside it (this file's before it changed in place) goes with --rebind.
    // (Removed with or without --rebind: bound for this file now, it is this file's past.)
    // So is one whose stamps would not keep this file's (a file changed before the MAX_SLICE_STAMPS
    // files the binding keeps: isSliceStampKept): the store records nothing, so nothing is counted.
    if (own !== undefined && (stamp === undefined || own.stamps.includes(stamp) || !isSliceStampKept(own.stamps, stamp))) return await removeMovedBindings(context, key, tensor, judged.inTheWay);
    // A stamp added to a binding the entry has: no new binding.
    if (own !== undefined) {
      stampOnly = true;
      break;
    }
    // A new binding counts against the entry's limit. Thousands of byte-identical tensors (all-zero
    // or all-one initialisations) would take the entry past MAX_SLICE_KEYS_PER_ENTRY, which the
    // store refuses: the rest stay unbound (served raw) rather than failing every run of the build.
    // Committed bindings (the store's, updated before a commit resolves) plus those in flight are
    // never fewer than the store will hold; but an alias counts in both from its commit until its
    // call returns here (with many in flight, 24 tensors were left unbound where 3 had to be). So a
    // tensor is left unbound only once the committed ones alone fill the entry, and one that does
    // not fit beside those in flight waits for one of them.
    const committed = context.store.getEntry(key)?.sliceKeys.length ?? 0;
    if (committed >= MAX_SLICE_KEYS_PER_ENTRY) return await leaveSliceUnbound(context, tensor, judged.inTheWay);
    const inFlight = context.pendingSlices.get(key);
    if (committed + (inFlight?.count ?? 0) < MAX_SLICE_KEYS_PER_ENTRY) {
      pending = inFlight ?? { count: 0, waiting: [] };
      pending.count++;
      context.pendingSlices.set(key, pending);
      break;
    }
    await new Promise<void>((resolve) => inFlight!.waiting.push(resolve));
    context.checkFailure();
  }
  // --rebind of this file changed in place (directory caches): its stale binding is moved in the
  // alias's own op (moveFrom), never bound beside first (format 3 and back, both left by a crash,
  // another file's binding evicted at MAX_SLICE_BINDINGS). A stamp added to its own binding moves nothing.
  const moveFrom = context.rebind && context.bindingsPerFile && !stampOnly && judged.inTheWay.length === 1 ? judged.inTheWay[0]!.entry.key : undefined;
  let bound: AliasAnswer;
  try {
    bound = await context.commits.aliasSlice({
      key,
      shardName,
      offsetBytes,
      sizeBytes,
      ...(stamp === undefined ? {} : { stamp }),
      ...(moveFrom === undefined ? {} : { moveFrom }),
    });
  } finally {
    if (pending) {
      pending.count--;
      if (pending.count === 0) context.pendingSlices.delete(key);
      for (const wake of pending.waiting.splice(0)) wake();
    }
  }
  if (bound === 'outranked') {
    // Nothing bound, nothing journalled: this file changed less recently than the MAX_SLICE_BINDINGS
    // files bound already, so its binding is the one a ninth drops (counted by onBindingDropped).
    // Not a vanished entry: no retry. (A binding in the way cannot be beside: this file's own from
    // before a rewrite changed less recently and would be the one dropped; a stampless one allows
    // no binding beside.)
    return { bindingDropped: true };
  }
  if (!bound) {
    // A gc --drop-unbound-entries removed the entry (bound to nothing) since this run found it.
    if (await isEntryGone(context, key)) throw new EntryGone(key);
    // There again: an s3:// drop deleted it, then saw this run's alias in its second listing and put
    // the entry back, while the store, finding it gone after the PUT, took the alias back (false).
    // Bound once more; a second false with the entry there fails as before.
    if (attempt === 1) return bindSlice(context, key, tensor, 2);
    throw new BuilderError('NOT_WRITABLE', `entry ${key} vanished from the cache while aliasing its slice`, { tensor: tensor.name });
  }
  context.aliased++;
  if (stampOnly) context.committed.stampsAdded++;
  else context.committed.bindings++;
  // Left beside only where several were in the way, or this file's own binding took a stamp.
  if (context.rebind || stampOnly) return await removeMovedBindings(context, key, tensor, judged.inTheWay);
  return {};
}

/**
 * A directory cache where the slice is bound for this file now, and a binding of this file from
 * before it changed in place stays beside (its bytes bound already for another file, which took a
 * stamp of this one; several in the way, where moveFrom moves one): removed, plain build or
 * --rebind, only while it still binds the slice to that entry with the stamps judged (not one
 * another writer made since), and reported (unboundFrom, unbound_stale). Where the store moved it
 * (moveFrom, a binding without file stamps), or an s3:// cache did, it is gone already.
 */
async function removeMovedBindings(context: TensorContext, key: string, tensor: TensorInfo, inTheWay: readonly SliceBinding[]): Promise<SliceOutcome> {
  if (!context.bindingsPerFile || inTheWay.length === 0) return {};
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const left = context.store.lookupSliceBindings(shardName, offsetBytes, sizeBytes);
  let unboundFrom: string | undefined;
  for (const binding of inTheWay) {
    const now = left.find((other) => other.entry.key === binding.entry.key);
    // Gone, or bound again with other stamps (another writer's) since judged: not this run's to remove.
    if (binding.entry.key === key || now === undefined || !sameStamps(now.stamps, binding.stamps)) continue;
    context.checkFailure();
    if (!(await context.commits.unbindSlice({ key: binding.entry.key, shardName, offsetBytes, sizeBytes }))) continue;
    context.committed.bindingsRemoved++;
    unboundFrom ??= binding.entry.key;
  }
  return unboundFrom === undefined ? {} : { unboundFrom };
}

function sameStamps(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((stamp) => b.includes(stamp));
}

/**
 * The tensor's entry is full: its slice stays unbound (served raw). A binding of the slice in the
 * way (this file's before it changed in place, one without file stamps) names other bytes than the
 * file holds now: with `rebind`, which would have moved it, it is removed, so that no reader (a
 * loader that checks no stamps, verify, inspect) is pointed at them; left, it was. Without `rebind`
 * it got here only by another writer's binding since checkSliceConflict looked: the SLICE_CONFLICT
 * the store gives an alias onto a slice of another entry. Other files' bindings stay.
 */
async function leaveSliceUnbound(context: TensorContext, tensor: TensorInfo, inTheWay: readonly SliceBinding[]): Promise<SliceOutcome> {
  if (inTheWay.length === 0) return { unaliased: true };
  if (!context.rebind) throw sliceConflictError(tensor.name, tensor.shardPath, undefined, { s3: !context.bindingsPerFile, binding: conflictingBinding(context, tensor, inTheWay) });
  const unboundFrom = await unbindInTheWay(context, tensor, inTheWay);
  return unboundFrom === undefined ? { unaliased: true } : { unaliased: true, unboundFrom };
}

/** Removes (--rebind) the bindings in the way, each only while it binds the slice to its entry; the first removed, if any. */
async function unbindInTheWay(context: TensorContext, tensor: TensorInfo, inTheWay: readonly SliceBinding[]): Promise<string | undefined> {
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  let first: string | undefined;
  for (const binding of inTheWay) {
    context.checkFailure();
    // Only while it is bound to that entry: a binding another writer made since stays.
    if (!(await context.commits.unbindSlice({ key: binding.entry.key, shardName, offsetBytes, sizeBytes }))) continue;
    context.committed.bindingsRemoved++;
    first ??= binding.entry.key;
  }
  return first;
}

/**
 * A tensor this run skips (coverage, no gain) whose slice is bound to another entry in the way:
 * this file held those bytes once (changed in place), or the binding has no file stamp. Without
 * `rebind` checkSliceConflict refused it (SLICE_CONFLICT); with it the binding is removed, since
 * nothing binds the slice anew, and left it pointed every reader at other bytes, a binding no run
 * could clear (and verify took for the skip). Other files' bindings (other revisions', models') are
 * theirs: left alone, --rebind and --rebind-other-files or not.
 */
async function unbindStaleSlice(context: TensorContext, key: string, tensor: TensorInfo): Promise<SliceOutcome> {
  if (tensor.slice.sizeBytes === 0) return {};
  const judged = judgeSlice(context, key, tensor);
  if (judged.own !== undefined || judged.inTheWay.length === 0) return {};
  // Without rebind: this file's binding came since checkSliceConflict looked (another writer); left as before.
  if (!context.rebind) return {};
  const unboundFrom = await unbindInTheWay(context, tensor, judged.inTheWay);
  return unboundFrom === undefined ? {} : { unboundFrom };
}

/**
 * What a failed build committed before it stopped (a failed build's error `context.committed`, or
 * `details.committed` of a store error passed through as it is: LOCK_TIMEOUT, S3_*): it stays in the
 * cache. Each kind of change counted apart, as each is: a file stamp added to a binding the slice
 * already had, or a blob put back, is no new entry or binding (review of 7c7f822: a build that
 * added 9 stamps and put 1 blob back said `0 new entries (771 KiB) and 9 slice bindings`).
 */
export interface BuildCommitted {
  /** Entries stored (encoded) by this run. */
  entries: number;
  /** Their payload bytes (blobs put back not included: `repairedBytes`). */
  storedBytes: number;
  /** New slice bindings this run wrote: a free slice bound, or one moved (--rebind) from another entry. */
  bindings: number;
  /** File stamps this run added to bindings the slices already had to the same entries (no new binding). */
  stampsAdded: number;
  /** Blobs of cached entries this run put back (missing or damaged), and their bytes. */
  blobsRepaired: number;
  repairedBytes: number;
  /** Bindings this run removed (--rebind: stale ones). */
  bindingsRemoved: number;
}

function committedBefore(context: TensorContext): BuildCommitted | undefined {
  const c = context.committed;
  return c.entries + c.bindings + c.stampsAdded + c.blobsRepaired + c.bindingsRemoved > 0 ? { ...c } : undefined;
}

/** Counts a blob put back (`sign` 1), or takes it out again (-1: it went with its entry, EntryGone). */
function countRepairedBlob(context: TensorContext, repaired: BlobRepair, sign: 1 | -1): void {
  if (repaired.bytes === 0) return;
  context.committed.blobsRepaired += sign;
  context.committed.repairedBytes += sign * repaired.bytes;
}

/**
 * Puts `committed` on a failed build's error, whatever its class, its code unchanged: a builder
 * error's `context`, a store error's `details` (LOCK_TIMEOUT, S3_UNAVAILABLE, S3_ERROR pass through
 * as they are), else the error's own `context`. Both describeError and renderErrorJson read there.
 */
function attachCommitted(error: unknown, committed: BuildCommitted | undefined): void {
  if (committed === undefined || typeof error !== 'object' || error === null) return;
  const e = error as { context?: unknown; details?: unknown };
  if (isBuilderError(error)) error.context.committed = committed;
  else if (isPlainRecord(e.details)) e.details.committed = committed;
  else if (isPlainRecord(e.context)) e.context.committed = committed;
  else if (Object.isExtensible(error)) e.context = { committed };
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.isExtensible(value);
}

const INTERRUPTED_NOTE = '; the cache holds every entry committed so far (run the build again to finish)';

function throwIfAborted(signal: AbortSignal | undefined): void {
  throwIfInterrupted(signal, INTERRUPTED_NOTE);
}

function buildInterrupted(signal: AbortSignal): BuilderError {
  return interruptedError(signal, INTERRUPTED_NOTE);
}

function summarize(input: {
  model: string;
  cache: string;
  results: BuildTensorReport[];
  backend: string;
  backendRequested: string;
  fallbackReason: string | null;
  jobs: number;
  workers: number;
  coverageMin: number;
  chunkSize: number;
  elapsedS: number;
  storedBytes: number;
  aliased: number;
  droppedBindings: number;
  formatMoved: boolean;
  objectFormatMoved: boolean;
  swept: TempFilesReport;
  journalRecovery: JournalRecovery | null;
  manifestRecovery: ManifestRecovery | null;
}): BuildReport {
  const count = (status: BuildTensorStatus): number => input.results.filter((t) => t.status === status).length;
  let compBytes = 0;
  let rawBytes = 0;
  for (const t of input.results) {
    if (t.status === 'encoded' || t.status === 'cached') {
      compBytes += t.compBytes ?? 0;
      rawBytes += t.sizeBytes;
    }
  }
  return {
    model: input.model,
    cache: input.cache,
    encoded: count('encoded'),
    cached: count('cached'),
    skipped_coverage: count('skipped_coverage'),
    skipped_dtype: count('skipped_dtype'),
    skipped_size: count('skipped_size'),
    skipped_no_gain: count('skipped_no_gain'),
    comp_bytes: compBytes,
    raw_bytes: rawBytes,
    ratio: rawBytes > 0 ? compBytes / rawBytes : null,
    stored_bytes: input.storedBytes,
    aliased: input.aliased,
    repaired: input.results.filter((t) => t.repaired === true).length,
    unaliased: input.results.filter((t) => t.unaliased === true).length,
    unbound_stale: input.results.filter((t) => t.unboundFrom !== undefined).length,
    rebound_other_files: input.results.filter((t) => t.reboundFrom !== undefined).length,
    dropped_bindings: input.droppedBindings,
    cache_format_moved: input.formatMoved,
    cache_object_format_moved: input.objectFormatMoved,
    journal_recovered: input.journalRecovery,
    manifest_recovered: input.manifestRecovery,
    temp_files_removed: input.swept.tempFiles.length,
    temp_bytes_removed: input.swept.tempBytes,
    backend: input.backend,
    backend_requested: input.backendRequested,
    fallback_reason: input.fallbackReason,
    jobs: input.jobs,
    workers: input.workers,
    coverage_min: input.coverageMin,
    chunk_size: input.chunkSize,
    elapsed_s: input.elapsedS,
    tensors: input.results,
  };
}
