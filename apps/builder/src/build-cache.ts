// The build: every tensor of a safetensors model into the cache store, streamed with bounded
// memory, hashed and calibrated on worker threads, encoded on the main thread, each entry committed as soon as it is encoded
// (so a build killed at any moment leaves a valid cache and a re-run only does what is missing).
import { availableParallelism } from 'node:os';
import { DEFAULT_CHUNK_SIZE, MAX_ELEMENT_COUNT } from '@splitzip/codec';
import { openSafetensorsModel, readTensorBytes, type SafetensorsModel, type TensorInfo } from '@splitzip/safetensors';
import { DEFAULT_COVERAGE_MIN, isS3Url, openCacheStore, type CacheEntry, type CacheStore } from '@splitzip/store';
import { createCommitBatcher, type CommitBatcher } from './create-commit-batcher.js';
import { ensureCacheDir } from './ensure-cache-dir.js';
import { createTensorProcessor, type TensorProcessor } from './create-tensor-processor.js';
import { createBufferPool, type BufferPool } from './create-buffer-pool.js';
import { createValuesEncoder, type ValuesEncoder } from './create-values-encoder.js';
import type { EncodeBackend } from './encode-backends.js';
import { viewBf16 } from './tensor-tasks.js';
import { interruptedError, throwIfInterrupted } from './throw-if-interrupted.js';
import { sliceConflictError, wrapBuildError } from './wrap-build-error.js';
import { BuilderError } from './errors.js';

/** The seed's gate (the store's default): encode only tensors whose Top-16 exponents cover 99 %. */
export { DEFAULT_COVERAGE_MIN };
/**
 * Floor of the in-flight memory budget: many small tensors may overlap up to this much (raw bytes
 * plus their payloads), so the workers stay busy on models of small tensors.
 */
export const MIN_IN_FLIGHT_BYTES = 32 * 1024 * 1024;
/**
 * Raw buffers the pool keeps alive for reuse, as a share of the largest tensor. Measured on the
 * 1.16 GB synthetic model (largest tensor 33.5 MB, --jobs 2): peak RSS 238-244 MB at 1.0,
 * 228-230 MB at 0.5, 230-233 MB with 8 MiB only; speed within noise.
 */
export const POOL_LARGEST_FACTOR = 0.5;
/** Payload bytes freed between two collectGarbage calls, at least. */
export const GC_EVERY_MIN_BYTES = 4 * 1024 * 1024;

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

export type BuildTensorStatus = 'encoded' | 'cached' | 'skipped_coverage' | 'skipped_dtype' | 'skipped_size';

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
   * encoded: stored by this run; cached: its entry was already there (an earlier run, another
   * model, or an identical tensor earlier in this model); skipped_*: served raw (the reason).
   */
  status: BuildTensorStatus;
  /** Top-16 exponent coverage (BF16 tensors only). */
  coverage: number | null;
  /** Payload bytes of its entry (encoded or cached), else null. */
  compBytes: number | null;
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
  /** BF16 tensors with more values than one payload holds (MAX_ELEMENT_COUNT). */
  skipped_size: number;
  /** Payload bytes of every tensor of the model served from the cache (encoded + cached). */
  comp_bytes: number;
  /** Raw bytes of the same tensors. */
  raw_bytes: number;
  /** comp_bytes / raw_bytes, null when nothing is cached. */
  ratio: number | null;
  /** Payload bytes written by this run (new entries only). */
  stored_bytes: number;
  /** Slice keys bound by this run. */
  aliased: number;
  backend: string;
  jobs: number;
  coverage_min: number;
  chunk_size: number;
  elapsed_s: number;
  tensors: BuildTensorReport[];
}

export type BuildProgressEvent =
  | { type: 'start'; tensorCount: number; totalBytes: number; backend: string; jobs: number; fallbackReason: string | null }
  | { type: 'tensor'; tensor: BuildTensorReport; doneBytes: number; totalBytes: number; doneTensors: number; tensorCount: number };

export interface BuildCacheOptions {
  /** A .safetensors file, a directory of shards, or a model.safetensors.index.json. */
  model: string;
  /**
   * The cache directory (created if missing), or `s3://bucket/prefix` (the cache and, if missing,
   * the bucket are created; endpoint and credentials from the AWS SDK environment variables).
   */
  cacheDir: string;
  coverageMin?: number;
  chunkSize?: number;
  backend?: EncodeBackend;
  /** Worker threads for hashing and calibration (encoding stays on the calling thread); 0: none. */
  jobs?: number;
  /**
   * Move a slice key that is bound to a different entry to this model's tensor (a shard replaced in
   * place). Off by default: the store refuses (SLICE_CONFLICT), since a slice key is only a file
   * name and position, and another model may own it.
   */
  rebindSlices?: boolean;
  /** Overrides the in-flight memory budget (raw bytes plus payloads, see inFlightBytesOf). */
  maxInFlightBytes?: number;
  signal?: AbortSignal;
  onProgress?: (event: BuildProgressEvent) => void;
  /**
   * Called after large payloads have been written, so that their memory returns at once instead
   * of when V8's heuristics next collect (the heap itself stays tiny, so that can be hundreds of
   * megabytes later). The CLI passes V8's minor GC; without it memory is still bounded, by more.
   */
  collectGarbage?: () => void;
}

export function defaultJobs(): number {
  return Math.max(1, Math.min(availableParallelism(), 8));
}

/** Builds (or completes) the cache for one model and returns the report. */
export async function buildCache(options: BuildCacheOptions): Promise<BuildReport> {
  const startMs = performance.now();
  const coverageMin = options.coverageMin ?? DEFAULT_COVERAGE_MIN;
  const chunkSize = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
  const jobs = options.jobs ?? defaultJobs();
  const signal = options.signal;
  const emit = options.onProgress ?? (() => {});
  throwIfAborted(signal);

  let model: SafetensorsModel | undefined;
  let store: CacheStore | undefined;
  let processor: TensorProcessor | undefined;
  let encoder: ValuesEncoder | undefined;
  // The backend probe (a short-lived worker) runs while the model and the cache open.
  const encoderReady = createValuesEncoder(options.backend ?? 'auto');
  encoderReady.catch(() => {});
  try {
    model = await openSafetensorsModel(options.model);
    // An s3:// cache is no path: nothing to create locally; the store creates the bucket if missing.
    const s3 = isS3Url(options.cacheDir);
    if (!s3) await ensureCacheDir(options.cacheDir);
    store = await openCacheStore(options.cacheDir, { create: true, coverageMin, chunkSize, ...(s3 ? { s3: { createBucket: true } } : {}) }).catch((error: unknown) => {
      throw wrapBuildError(error, { cacheDir: options.cacheDir });
    });

    const tensors = model.tensors;
    const results: BuildTensorReport[] = new Array(tensors.length);
    let largestBytes = 0;
    let totalBytes = 0;
    for (const tensor of tensors) {
      if (tensor.dtype === 'BF16' && tensor.slice.sizeBytes / 2 <= MAX_ELEMENT_COUNT) {
        largestBytes = Math.max(largestBytes, tensor.slice.sizeBytes);
        totalBytes += tensor.slice.sizeBytes;
      }
    }
    // Memory bound: tensors in flight hold at most max(floor, one largest tensor + its payload);
    // the pool keeps at most half a largest tensor's worth of raw buffers (or 8 MiB for models of
    // small tensors, so that several can be reused) alive for reuse.
    const reserve = (sizeBytes: number): number => inFlightBytesOf(sizeBytes, coverageMin, chunkSize);
    const budgetBytes = options.maxInFlightBytes ?? Math.max(MIN_IN_FLIGHT_BYTES, reserve(largestBytes));
    let droppedBytes = 0;
    const pool = createBufferPool(Math.max(Math.ceil(POOL_LARGEST_FACTOR * largestBytes), MIN_IN_FLIGHT_BYTES / 4), (bytes) => (droppedBytes += bytes));
    processor = await createTensorProcessor({ jobs, pool });
    encoder = await encoderReady;
    emit({ type: 'start', tensorCount: tensors.length, totalBytes, backend: encoder.backend, jobs, fallbackReason: encoder.fallbackReason });

    let doneBytes = 0;
    let doneTensors = 0;
    const finish = (index: number, report: BuildTensorReport): void => {
      results[index] = report;
      doneTensors++;
      if (report.status === 'encoded') droppedBytes += report.compBytes ?? 0;
      if (options.collectGarbage && droppedBytes >= GC_EVERY_MIN_BYTES) {
        droppedBytes = 0;
        options.collectGarbage();
      }
      if (report.status !== 'skipped_dtype' && report.status !== 'skipped_size') doneBytes += report.sizeBytes;
      emit({ type: 'tensor', tensor: report, doneBytes, totalBytes, doneTensors, tensorCount: tensors.length });
    };

    // Commits are concurrent: the store merges them into group commits (one record, one fsync).
    const state: { failure: unknown } = { failure: null };
    const context: TensorContext = {
      model,
      store,
      commits: createCommitBatcher(store, { rebind: options.rebindSlices ?? false }),
      processor,
      encoder,
      pool,
      cacheDir: options.cacheDir,
      coverageMin,
      chunkSize,
      rebind: options.rebindSlices ?? false,
      checkFailure() {
        if (state.failure !== null) throw state.failure;
      },
      storedBytes: 0,
      aliased: 0,
    };
    // Ctrl-C: stop the workers at once; a commit in progress completes (it is atomic anyway).
    const activeProcessor = processor;
    const onAbort = (): void => {
      state.failure ??= buildInterrupted(signal!);
      void activeProcessor.close();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const active = new Set<Promise<void>>();
    let inFlightBytes = 0;
    // At most jobs + 1 tensors in flight (one being read while the workers compute), within budget.
    const maxActive = Math.max(1, jobs) + 1;

    for (let index = 0; index < tensors.length && state.failure === null; index++) {
      const tensor = tensors[index]!;
      const base = baseReport(tensor);
      if (tensor.dtype !== 'BF16') {
        finish(index, { ...base, status: 'skipped_dtype' });
        continue;
      }
      if (tensor.slice.sizeBytes / 2 > MAX_ELEMENT_COUNT) {
        finish(index, { ...base, status: 'skipped_size' });
        continue;
      }
      const reservedBytes = reserve(tensor.slice.sizeBytes);
      while (active.size > 0 && (active.size >= maxActive || inFlightBytes + reservedBytes > budgetBytes) && state.failure === null) {
        await Promise.race(active);
      }
      if (state.failure !== null) break;
      if (signal?.aborted) {
        state.failure = buildInterrupted(signal);
        break;
      }
      inFlightBytes += reservedBytes;
      const task: Promise<void> = processTensor(context, tensor, base, signal).then(
        (report) => finish(index, report),
        (error: unknown) => {
          state.failure ??= error;
        },
      );
      const tracked = task.finally(() => {
        inFlightBytes -= reservedBytes;
        active.delete(tracked);
      });
      active.add(tracked);
    }
    if (state.failure !== null) await processor.close();
    await Promise.allSettled(active);
    signal?.removeEventListener('abort', onAbort);
    if (state.failure === null && signal?.aborted) state.failure = buildInterrupted(signal);
    if (state.failure !== null) throw state.failure;

    return summarize({
      model: options.model,
      cache: options.cacheDir,
      results,
      backend: encoder.backend,
      jobs,
      coverageMin,
      chunkSize,
      elapsedS: (performance.now() - startMs) / 1000,
      storedBytes: context.storedBytes,
      aliased: context.aliased,
    });
  } catch (error) {
    throw wrapBuildError(error, { cacheDir: options.cacheDir });
  } finally {
    await processor?.close().catch(() => {});
    await (encoder ?? (await encoderReady.catch(() => undefined)))?.dispose().catch(() => {});
    await store?.close().catch(() => {});
    await model?.close().catch(() => {});
  }
}

interface TensorContext {
  model: SafetensorsModel;
  store: CacheStore;
  /** Every write of the build goes through here (group commit: one store call per batch). */
  commits: CommitBatcher;
  processor: TensorProcessor;
  encoder: ValuesEncoder;
  pool: BufferPool;
  cacheDir: string;
  coverageMin: number;
  chunkSize: number;
  rebind: boolean;
  /** Throws the build's first failure: no commit starts after one. */
  checkFailure(): void;
  storedBytes: number;
  aliased: number;
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

/** One BF16 tensor: read, hash on a worker, then alias an existing entry, or calibrate (worker) + encode + store. */
async function processTensor(context: TensorContext, tensor: TensorInfo, base: BaseReport, signal: AbortSignal | undefined): Promise<BuildTensorReport> {
  const { store, processor, pool } = context;
  try {
    const target = pool.acquire(tensor.slice.sizeBytes);
    let bytes: Uint8Array;
    try {
      bytes = await readTensorBytes(context.model, tensor, target);
      throwIfAborted(signal);
    } catch (error) {
      pool.release(target.buffer as ArrayBuffer);
      throw error;
    }
    const slot = await processor.acquire().catch((error: unknown) => {
      pool.release(bytes.buffer as ArrayBuffer);
      throw error;
    });
    try {
      // A slice the cache does not know is most likely a new tensor: hash and calibrate in one
      // round trip (wasted only for a tensor that another model or slice already stored).
      const { shardName, offsetBytes, sizeBytes } = tensor.slice;
      const likelyNew = store.lookupBySlice(shardName, offsetBytes, sizeBytes) === undefined;
      const hashed = await slot.hash(bytes, tensor.shape, likelyNew ? context.coverageMin : undefined);
      const { key } = hashed;
      const withKey = { ...base, key };
      checkSliceConflict(context, key, tensor);
      const existing = store.getEntry(key);
      if (existing) {
        if (hashed.calibrated) pool.release(hashed.calibrated.bytes.buffer as ArrayBuffer);
        slot.release();
        context.checkFailure();
        await bindSlice(context, key, tensor);
        return { ...withKey, status: 'cached', coverage: entryCoverage(existing), compBytes: existing.compBytes };
      }
      const { coverage, exponents, sha256, bytes: calibrated } = hashed.calibrated ?? (await slot.calibrate(context.coverageMin));
      slot.release();
      let payload: Uint8Array;
      try {
        if (exponents === null || sha256 === null) return { ...withKey, coverage, status: 'skipped_coverage' };
        context.checkFailure();
        // Encoding runs here, on the main thread: see hash-worker.ts for why.
        payload = await context.encoder.encode(viewBf16(calibrated), exponents, context.chunkSize);
      } finally {
        pool.release(calibrated.buffer as ArrayBuffer);
      }
      context.checkFailure();
      // The slice goes in the same commit as the entry when it is free (the usual case).
      const sliceFree = store.lookupBySlice(shardName, offsetBytes, sizeBytes) === undefined;
      const { added } = await context.commits.addEntry({
        key,
        qualname: tensor.name,
        payload,
        shape: [...tensor.shape],
        dtype: 'BF16',
        sha256,
        ...(sliceFree ? { sliceKeys: [[shardName, offsetBytes, sizeBytes] as const] } : {}),
      });
      if (added) context.storedBytes += payload.byteLength;
      if (added && sliceFree) context.aliased++;
      else await bindSlice(context, key, tensor);
      // An identical tensor of this run may have been committed first: then this one is 'cached'.
      return { ...withKey, coverage, status: added ? 'encoded' : 'cached', compBytes: payload.byteLength };
    } finally {
      slot.release();
    }
  } catch (error) {
    throw wrapBuildError(error, { tensor: tensor.name, file: tensor.shardPath, cacheDir: context.cacheDir });
  }
}

/** Top-16 coverage of a cached tensor, from its payload meta: the values that are not escapes. */
function entryCoverage(entry: CacheEntry): number {
  const { elementCount, escapeCount } = entry.meta;
  return elementCount > 0 ? (elementCount - escapeCount) / elementCount : 1;
}

/** Refuses early (before anything is written) a slice bound to other bytes, unless rebinding. */
function checkSliceConflict(context: TensorContext, key: string, tensor: TensorInfo): void {
  // The store would refuse the alias too (SLICE_CONFLICT); failing here writes nothing first.
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const current = context.store.lookupBySlice(shardName, offsetBytes, sizeBytes);
  if (!current || current.key === key || sizeBytes === 0 || context.rebind) return;
  throw sliceConflictError(tensor.name, tensor.shardPath);
}

/**
 * Binds the tensor's slice key to its entry unless it already is. A slice bound to another entry
 * (the shard was replaced in place, or another model's shard has the same name) is a conflict the
 * store refuses; `rebind` moves it, since the bytes just read are what the file holds now.
 */
async function bindSlice(context: TensorContext, key: string, tensor: TensorInfo): Promise<void> {
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const current = context.store.lookupBySlice(shardName, offsetBytes, sizeBytes);
  if (current?.key === key) return;
  // Empty tensors next to each other share one slice key; whichever holds it decodes to nothing.
  if (current && sizeBytes === 0) return;
  const bound = await context.commits.aliasSlice({ key, shardName, offsetBytes, sizeBytes });
  if (!bound) throw new BuilderError('NOT_WRITABLE', `entry ${key} vanished from the cache while aliasing its slice`, { tensor: tensor.name });
  context.aliased++;
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
  jobs: number;
  coverageMin: number;
  chunkSize: number;
  elapsedS: number;
  storedBytes: number;
  aliased: number;
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
    comp_bytes: compBytes,
    raw_bytes: rawBytes,
    ratio: rawBytes > 0 ? compBytes / rawBytes : null,
    stored_bytes: input.storedBytes,
    aliased: input.aliased,
    backend: input.backend,
    jobs: input.jobs,
    coverage_min: input.coverageMin,
    chunk_size: input.chunkSize,
    elapsed_s: input.elapsedS,
    tensors: input.results,
  };
}
