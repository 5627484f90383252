import {
  calibrateFromHistogram,
  countExponents,
  MAX_ELEMENT_COUNT,
  readPayloadMeta,
  type CodecArena,
  type PayloadLayout,
  type PayloadMeta,
} from '@splitzip/codec';
import { describeValue, formatCoverage } from '@splitzip/codec/internal';
import { isFromOtherFile, MAX_BUFFER_BYTES, readTensorBytes, type SafetensorsDtype, type SafetensorsModel, type SliceKey, type TensorInfo } from '@splitzip/safetensors';
import { isStoreError, MAX_SLICE_KEYS_PER_ENTRY, type CacheEntry, type OpenedBlob } from '@splitzip/store';
import { bindFoundSlice, checkSourceBytes, describeShard, ONE_FILE_BINDING, stamplessStaleRemedy, STAMPLESS_TRUST_NOTE, WEAK_TRUST_NOTE, type SourceRefetch } from './check-source-bytes.js';
import { OTHER_FILE_BINDING, staleBindingRemedy } from './stale-binding-remedy.js';
import { dropModelRangeCopy, reportModelRangeDamage } from './drop-model-range-copy.js';
import { bf16ValueCount } from './bf16-value-count.js';
import { describeNoGain } from './check-payload-gain.js';
import { describeUnboundNoGain } from './describe-unbound-no-gain.js';
import { hashTensorKey } from './hash-tensor-key.js';
import { settleUnlessAborted } from './settle-unless-aborted.js';
import { entryDescribesTensor } from './entry-describes-tensor.js';
import { checkPayloadAgainstEntry } from './check-payload-against-entry.js';
import { decodeStreamedPayload, planStreamedDecode } from './decode-streamed-payload.js';
import { describeBuildRemedy } from './describe-build-remedy.js';
import type { DecodeBackend, DecodeCallOptions, OpenedPayloadFile, PayloadEntryFields, ReadDecodeResult, ReadDecodeStaging, StagingLease } from './create-cpu-decoder.js';
import { DEFAULT_SYNC_READ_MAX_BYTES, type ByteReader } from './create-file-reader.js';
import { releaseStagingSlotWhenSettled, STAGING_ALIGN_BYTES, type StagingPool, type StagingSlot } from './create-staging-pool.js';
import { abortedError, CACHE_FAILURE_CODES, describeError, isRetryableError, isRuntimeError, nameTensorInError, RuntimeError } from './errors.js';
import { checkModelOpen, checkShardPathUnchanged, checkShardUnchanged, modelClosedError } from './resolve-tensor-request.js';
import type { ReadWindow } from './create-read-window.js';
import type { ShardCache } from './open-shard-cache.js';
import { readExactAbortable } from './read-exact-abortable.js';
import { isSettlingBackend } from './settling-backends.js';
import { takeTurnIfDue } from './take-turn-if-due.js';
import type { LoadedTensor, LoadReason, TensorReport } from './types.js';

/**
 * Blobs up to this size are read synchronously from a local cache (the store's readBlobSync), by
 * the same measure as the runtime's file reader: four thread-pool round trips (open, stat, read,
 * close) cost more than a 1 MiB copy from the page cache. 1 MiB loaded the default model 10%
 * faster than 256 KiB (5.2 vs 5.9 ms, same run).
 */
export { DEFAULT_SYNC_READ_MAX_BYTES };

/**
 * A payload of at most SMALL_PAYLOAD_MAX_BYTES is staged in a buffer of its own when the pool's
 * slots hold at least LARGE_SLOT_MIN_BYTES: a slot holds the largest payload of the model (3 MiB
 * for the default model), and its 20 payloads of 1-3 KiB each held one while they waited on the
 * link, so the next large tensor's read waited for a slot while the link drained (0.3-0.4 ms idle
 * twice a paced load). Only payloads the backend decodes on the calling thread (no shared memory
 * needed: see DecodeBackend.inlineMaxValues).
 */
export const SMALL_PAYLOAD_MAX_BYTES = 64 * 1024;
export const LARGE_SLOT_MIN_BYTES = 1024 * 1024;
/**
 * A payload staged outside the pool above this size is allocated only once the store has confirmed
 * its blob has that size (an lstat, or an S3 HEAD): a damaged or hostile manifest entry can claim a
 * payload up to ~4.3 bytes a value (every value an escape), and the buffer came before the read
 * that found the blob missing. Below it the check would cost more than the allocation it saves.
 */
export const CONFIRM_BLOB_ABOVE_BYTES = 64 * 1024 * 1024;

/** What one load needs; built once per loadTensor/loadModel call and shared by its tensors. */
export interface ServeEnv {
  cache: ShardCache | undefined;
  pool: StagingPool | undefined;
  /** Custom I/O for both paths; undefined: the store's readBlob and safetensors' readTensorBytes. */
  reader: ByteReader | undefined;
  backend: DecodeBackend;
  verifyDigest: boolean;
  cacheOnly: boolean;
  explainMisses: boolean;
  signal: AbortSignal | undefined;
  /** Counts payloads staged outside the pool (larger than its slots, or no pool). */
  onStagingOverflow: () => void;
  /** Blobs up to this size are read with synchronous calls from a local cache (0: never). */
  syncReadMaxBytes: number;
  /** Bounds the bytes being read at once across this load's tensors (undefined: no bound). */
  readWindow?: ReadWindow | undefined;
}

/** A tensor to serve: from a model (raw fallback possible) or a cache entry alone (bare slice). */
export interface ServeTarget {
  name: string;
  dtype: SafetensorsDtype;
  shape: readonly number[];
  slice: SliceKey;
  /** Present when the tensor belongs to an open model: the raw source. */
  model: SafetensorsModel | undefined;
  info: TensorInfo | undefined;
  /** The entry found for the slice (looked up by the caller, once). */
  entry: CacheEntry | undefined;
  /**
   * Set when the slice is bound, but a check through this cache's store found its shard, at its
   * current stamp, to hold other bytes than the entry (the file changed, or is another model's of
   * the same name and layout): `entry` is undefined, and the tensor is served raw unhashed.
   */
  /** `recorded`: the stamps of every binding of the slice; `bindings`: how many it has (one per file, a local cache's revisions side by side). */
  /** `current` null: a stampless shard (uncheckEvery), whose bindings all hold another shape or dtype. */
  staleStamp?: { recorded: readonly string[]; current: string | null; found: 'checked' | 'shape'; bindings?: number };
  /**
   * Set when the slice is bound, but the binding has no record of its shard's stamp (an object's
   * `etag:<etag>`, or a file's `<size>:<mtime ns>:<ctime ns>:<inode>`): `entry` is undefined, the tensor is read raw,
   * and its bytes are checked against this entry (checkSourceBytes).
   */
  /** `weak`: the file system (weakFileSystemOf) the shard is on, whose stamps prove nothing: checked at every load, never recorded. */
  /**
   * `candidates`: the entries of every binding of the slice that describe the tensor, latest first
   * (`entry` the first): the bytes are checked against each; `recorded` every binding's stamps;
   * `bindings` how many the slice has.
   */
  /** `stamp` null: the shard has none (a ByteSource without an ETag), at a slice with several bindings: checked at every load, never recorded. */
  unchecked?: { entry: CacheEntry; stamp: string | null; recorded: readonly string[]; weak?: string; candidates?: readonly CacheEntry[]; bindings?: number };
  /**
   * Set when the slice has no binding and its shard has a stamp that proves something (not on a
   * weak file system): the stamp a binding made from this tensor's bytes records (bindFoundSlice).
   */
  unboundStamp?: string;
}



/** A buffer for `bytes` whose byteOffset is 0 and length a multiple of the alignment. */
function allocateAligned(bytes: number): Uint8Array {
  const padded = Math.max(STAGING_ALIGN_BYTES, Math.ceil(bytes / STAGING_ALIGN_BYTES) * STAGING_ALIGN_BYTES);
  return new Uint8Array(padded);
}

/**
 * Largest tensor the runtime allocates itself: one typed array (@splitzip/safetensors'
 * MAX_BUFFER_BYTES; Node 20: 4 GiB). A caller cannot
 * pass a larger buffer either, so a larger raw tensor is an error naming it instead of a RangeError.
 */
export const MAX_TENSOR_BUFFER_BYTES = MAX_BUFFER_BYTES;

/** Throws TENSOR_TOO_LARGE when the runtime cannot allocate one buffer of `sizeBytes` for `name`. */
export function checkAllocatable(sizeBytes: number, name: string): void {
  if (sizeBytes > MAX_TENSOR_BUFFER_BYTES) {
    throw new RuntimeError('TENSOR_TOO_LARGE', `${name} is ${sizeBytes} bytes, above the largest buffer this runtime can allocate (${MAX_TENSOR_BUFFER_BYTES} bytes)`, {
      tensor: name,
      sizeBytes,
      limit: MAX_TENSOR_BUFFER_BYTES,
    });
  }
}

/** The destination for a tensor: the caller's buffer (checked) or a fresh one. */
export function prepareOutput(target: Uint8Array | undefined, sizeBytes: number, name: string): Uint8Array {
  const given = checkOutputBuffer(target, sizeBytes, name);
  if (given !== undefined) return given;
  checkAllocatable(sizeBytes, name);
  return new Uint8Array(sizeBytes);
}

/** The caller's buffer for a tensor, checked and cut to its size; undefined when there is none (the runtime allocates one). */
export function checkOutputBuffer(target: Uint8Array | undefined, sizeBytes: number, name: string): Uint8Array | undefined {
  if (target === undefined) return undefined;
  if (!(target instanceof Uint8Array)) {
    const kind = target === null ? 'null' : typeof target === 'object' ? ((target as object).constructor?.name ?? 'object') : typeof target;
    const got = describeValue(target);
    throw new RuntimeError('INVALID_ARGUMENT', `output buffer for ${name} must be a Uint8Array, got ${got}`, { tensor: name, outputType: kind, got });
  }
  if (target.byteLength < sizeBytes) {
    throw new RuntimeError('OUTPUT_TOO_SMALL', `output buffer for ${name} holds ${target?.byteLength} bytes, the tensor needs ${sizeBytes}`, {
      tensor: name,
      outputBytes: target?.byteLength,
      sizeBytes,
    });
  }
  return target.subarray(0, sizeBytes);
}

/**
 * What `allocate` returned for a tensor, checked as an output buffer. Undefined is refused as null
 * is: a callback that forgets a name (`views.get(name)` of a map missing it) would have the tensor
 * land in a buffer of the runtime's own, the caller's arena view left as it was, with no error.
 */
export function checkAllocatedBuffer(allocated: Uint8Array | undefined, sizeBytes: number, name: string): Uint8Array {
  if (allocated === undefined) {
    throw new RuntimeError(
      'INVALID_ARGUMENT',
      `allocate returned undefined for ${name}: it must return a Uint8Array of at least ${sizeBytes} bytes (leave allocate out for the runtime to allocate every tensor)`,
      { option: 'allocate', tensor: name, outputType: 'undefined', sizeBytes },
    );
  }
  return checkOutputBuffer(allocated, sizeBytes, name) as Uint8Array;
}

/** A store's error reading `entry` for `tensor` (the tensor loaded, which may be another name for the entry's bytes). */
function mapStoreError(error: unknown, entry: CacheEntry, tensor: string): RuntimeError {
  if (error instanceof RuntimeError) return error;
  const { code, message } = describeError(error);
  const context = { tensor, key: entry.key, qualname: entry.qualname, storeCode: code };
  if (isRetryableError(error)) {
    return new RuntimeError('CACHE_UNAVAILABLE', `cache entry ${entry.key} (${entry.qualname}): ${message}`, { ...context, retryable: true }, { cause: error });
  }
  if (code === 'META_MISMATCH') {
    return new RuntimeError('CACHE_ENTRY_MISMATCH', `cache entry ${entry.key} (${entry.qualname}): ${message}`, context, { cause: error });
  }
  if (code === 'SLOT_TOO_SMALL') {
    return new RuntimeError('SLOT_TOO_SMALL', `cache entry ${entry.key} (${entry.qualname}): ${message}`, context, { cause: error });
  }
  return new RuntimeError('CACHE_READ_FAILED', `cache entry ${entry.key} (${entry.qualname}): ${message}`, context, { cause: error });
}

/** Raw sizes of a cache's entries, rebuilt when its entry count changes (entries are only added). */
const rawSizesByCache = new WeakMap<ShardCache, { entryCount: number; sizes: Set<number> }>();

function cachedRawSizes(cache: ShardCache): Set<number> {
  const entryCount = cache.store.size;
  let known = rawSizesByCache.get(cache);
  if (known?.entryCount !== entryCount) {
    let sizes: Set<number>;
    try {
      sizes = new Set(Array.from(cache.store.entries(), (entry) => entry.rawBytes));
    } catch (error) {
      // A handle closed under the load (STORE_CLOSED): its misses are explained without the cache
      // (the sizes known so far, or none), as before afa2254 asked for them first; it failed the load.
      if (isStoreError(error, 'STORE_CLOSED')) return known?.sizes ?? new Set();
      throw error;
    }
    known = { entryCount, sizes };
    rawSizesByCache.set(cache, known);
  }
  return known.sizes;
}

/**
 * Why a tensor without an entry is not cached. `coverage` needs the bytes (see explainMisses), and
 * so does the content-key look-up, which hashes them (on a decode thread where the backend has one).
 */
export async function explainMiss(target: ServeTarget, data: Uint8Array | undefined, env: ServeEnv): Promise<{ reason: LoadReason; detail: string }> {
  if (target.dtype !== 'BF16') return { reason: 'dtype', detail: `dtype ${target.dtype} is not BF16` };
  if (env.cache === undefined) return { reason: 'missing', detail: 'no cache' };
  if (target.unchecked !== undefined) {
    return {
      reason: 'unchecked',
      detail:
        target.unchecked.stamp === null
          ? target.unchecked.bindings === 1
            ? `${describeShard(target.slice.shardName, null)} cannot be told from another revision of these files at ${ONE_FILE_BINDING}: only a load that reads it raw can check it, at every load (nothing is recorded without a stamp; ${STAMPLESS_TRUST_NOTE})`
            : `the slice has ${target.unchecked.bindings} bindings (one per file), and ${describeShard(target.slice.shardName, null)} has no stamp to pick its own: only a load that reads it raw can check it against every binding's entry, at every load (nothing is recorded without a stamp)`
          : target.unchecked.weak !== undefined
          ? `the slice is bound, but ${describeShard(target.slice.shardName, target.unchecked.stamp)} is on ${target.unchecked.weak} whose file stamps prove nothing: only a load that reads it raw can check it, at every load (${WEAK_TRUST_NOTE})`
          : `the slice is bound, but ${(target.unchecked.bindings ?? 1) > 1 ? `none of its ${target.unchecked.bindings} bindings (one per file) has a record` : 'the binding has no record'} of ${describeShard(target.slice.shardName, target.unchecked.stamp)}, and no load through this cache handle has checked it: a load without cacheOnly reads it raw and checks it (${(target.unchecked.bindings ?? 1) > 1 ? "an entry's bytes" : "the entry's bytes"}: served from the cache afterwards, and recorded where the cache can be written; other bytes: ${describeBuildRemedy(env.cache, staleBindingRemedy(target.unchecked.recorded, target.unchecked.stamp, env.cache.remote))})`,
    };
  }
  if (target.staleStamp !== undefined) {
    const { recorded, current, found } = target.staleStamp;
    const several = (target.staleStamp.bindings ?? 1) > 1;
    const how = found === 'checked' ? 'checked earlier through this cache' : `${several ? 'each entry is' : 'its entry is'} a tensor of another shape: not this ${JSON.stringify(target.shape)} one`;
    const remedy = staleBindingRemedy(recorded, current, env.cache.remote);
    // A stampless shard: no load binds it, and gc --model's or --rebind's binding is another revision's.
    const fix = current === null ? stamplessStaleRemedy(env.cache) : found === 'checked' ? remedy : `${OTHER_SHAPE_REMEDY}, or ${remedy}`;
    return {
      reason: 'stale',
      // Of another shape, it is never hashed, so no load binds it: `gc --model` removes the binding,
      // and the next load finds the tensor by content key.
      detail: `${describeShard(target.slice.shardName, current)} holds other bytes than ${several ? `any of the ${target.staleStamp.bindings} entries its slice is bound to (one binding per file)` : 'the entry its slice is bound to'} (${how}; ${isFromOtherFile(recorded, current) ? `${OTHER_FILE_BINDING}: ` : ''}${several ? "the bindings' stamps" : "the binding's stamps"}: ${recorded.length === 0 ? 'none' : recorded.join(', ')}): served raw; ${describeBuildRemedy(env.cache, fix)}`,
    };
  }
  const elementCount = target.slice.sizeBytes / 2;
  if (elementCount > MAX_ELEMENT_COUNT) return { reason: 'missing', detail: `${elementCount} values exceed one payload` };
  // Not even a payload without escapes is smaller than its raw bytes: a build --skip-no-gain skips it
  // unread (decided without its bytes, as that build does; cacheOnly too). First, in the build's
  // order: such a build never looks at its coverage (verify --model and stats --skip-no-gain agree).
  // But a default build caches it, and its binding can go while its entry stays (`gc --model` of
  // another model or revision of its shard names): then it is looked up by content key as any
  // miss is. Only where no entry has its size (a cache built with --skip-no-gain) can none hold it:
  // `no-gain` unhashed. Until 2026-12-07 every such tensor was `no-gain`, never bound again.
  const chunkSize = env.cache.store.chunkSize;
  const noGain = describeNoGain(target.slice.sizeBytes, 0, chunkSize);
  const sizeCached = cachedRawSizes(env.cache).has(target.slice.sizeBytes);
  if (noGain !== null && !sizeCached) {
    // Under the gate, a default build skips it for its coverage (skipped_coverage), and verify --model
    // names that first: `coverage`, with the no-gain fact as a note. Only the bytes tell.
    if (env.explainMisses && data !== undefined && data.byteLength >= 2) {
      const { coverage } = calibrateFromHistogram(countBf16Exponents(data));
      if (coverage < env.cache.coverageMin) {
        return { reason: 'coverage', detail: `coverage ${formatCoverage(coverage, 6)} < gate ${env.cache.coverageMin} (no build caches it); it ${noGain}` };
      }
    }
    return { reason: 'no-gain', detail: noGain };
  }
  // cacheOnly: only the bytes' histogram tells a tensor the build skipped for its coverage from one
  // not built, and the cache records no skips: such a load reads no raw bytes, so it cannot say which.
  if (data === undefined && target.info !== undefined) {
    if (noGain !== null) return { reason: 'missing', detail: describeUnboundNoGain(target, env.cache, noGain) };
    return {
      reason: 'missing',
      detail: `no entry for this slice: either the build skipped it for its Top-16 exponent coverage (under the gate ${env.cache.coverageMin}: no build caches it) or for its escapes (its payload would not be smaller than its raw bytes), or no build of this model cached it (${describeBuildRemedy(env.cache, `\`splitzip build <model> --out ${env.cache.root}\` does`)}); only its raw bytes tell which, and a cacheOnly load reads none: a load without cacheOnly reports it as \`coverage\`, \`no-gain\` or \`missing\``,
    };
  }
  if (!env.explainMisses || data === undefined || data.byteLength < 2) {
    return { reason: 'missing', detail: noGain === null ? 'no entry for this slice' : `no entry for this slice: it ${noGain}, but the cache holds entries of its size, one of which may be its bytes (explainMisses looks it up by content key)` };
  }
  // The builder's gate: Top-16 exponent coverage below coverage_min means it was skipped on purpose.
  const { coverage, escapeCount } = calibrateFromHistogram(countBf16Exponents(data));
  // Rounded down: a coverage under the gate never prints as the gate.
  if (coverage < env.cache.coverageMin) {
    return { reason: 'coverage', detail: `coverage ${formatCoverage(coverage, 6)} < gate ${env.cache.coverageMin}${noGain === null ? '' : ` (no build caches it); it ${noGain}`}` };
  }
  // The bytes may be cached under another slice: one entry binds at most MAX_SLICE_KEYS_PER_ENTRY
  // slices of identical tensors (the rest stay unbound), or the build that cached them was of another model.
  // Hashed only when some entry has this many bytes: a load against a cache of other tensors
  // must not pay a SHA-1 of every miss on top of the histogram.
  const holder = sizeCached ? env.cache.getEntry((await hashTensorKey(env.backend, data, target.shape, 'BF16', env.signal, target.name)).key) : undefined;
  if (holder !== undefined) {
    const full = holder.sliceKeys.length >= MAX_SLICE_KEYS_PER_ENTRY;
    if (full) {
      return {
        reason: 'missing',
        detail: `entry ${holder.key} (${holder.qualname}) holds these bytes, but this slice is not bound to it: an entry binds at most ${MAX_SLICE_KEYS_PER_ENTRY} slices of identical tensors, and this one has as many`,
      };
    }
    const why = `entry ${holder.key} (${holder.qualname}) holds these bytes, but this slice was not bound to it (the cache was built from other shard names or offsets, or not from this model, or its binding was removed: \`splitzip gc --model\` of another model or revision of these shard names)`;
    const { shardName, offsetBytes, sizeBytes } = target.slice;
    // Only a tensor of the entry's own name: a renamed or re-sharded copy of the model keeps its
    // tensor names. Bytes cached under another name (a tied weight, or another model's tensor that
    // happens to match) are left to a build: a bare slice request, which no model checks, follows
    // whatever its slice is bound to.
    const bindable = target.unboundStamp !== undefined && holder.qualname === target.name;
    const bound = bindable ? bindFoundSlice(env.cache, { key: holder.key, shardName, offsetBytes, sizeBytes, stamp: target.unboundStamp! }) : undefined;
    return { reason: 'missing', detail: bound === undefined ? `${why}: ${describeBuildRemedy(env.cache, 'a build of this model binds it')}` : `${why}: ${bound}` };
  }
  // No entry holds its bytes, and it would not shrink (for its size alone, or its escapes): a build
  // --skip-no-gain skipped it (skipped_no_gain).
  if (noGain !== null) return { reason: 'no-gain', detail: noGain };
  const escapesNoGain = describeNoGain(data.byteLength, escapeCount, chunkSize);
  if (escapesNoGain !== null) return { reason: 'no-gain', detail: escapesNoGain };
  return { reason: 'missing', detail: `no entry for this slice (coverage ${formatCoverage(coverage, 6)} passes the gate)` };
}

/** A binding to an entry of another shape than the tensor at its slice: what removes it (builder README, gc --model), before the stale remedy. */
const OTHER_SHAPE_REMEDY = '`splitzip gc <cache> --model <model>` removes the binding (the next load binds the tensor by content key)';

/** Values per block when a caller's buffer is not 2-byte aligned (a Uint16Array cannot view it). */
const UNALIGNED_COUNT_BLOCK_VALUES = 32 * 1024;

/** countExponents over BF16 bytes at any offset: a view where aligned, else block copies through one scratch. */
function countBf16Exponents(data: Uint8Array): Uint32Array {
  const count = bf16ValueCount(data.byteLength);
  if (data.byteOffset % 2 === 0) return countExponents(new Uint16Array(data.buffer, data.byteOffset, count));
  const histogram = new Uint32Array(256);
  const scratch = new Uint16Array(Math.min(count, UNALIGNED_COUNT_BLOCK_VALUES));
  const scratchBytes = new Uint8Array(scratch.buffer);
  for (let from = 0; from < count; from += scratch.length) {
    const n = Math.min(scratch.length, count - from);
    scratchBytes.set(data.subarray(from * 2, (from + n) * 2));
    countExponents(scratch.subarray(0, n), histogram);
  }
  return histogram;
}

function abortIfNeeded(signal: AbortSignal | undefined, name: string) {
  if (signal?.aborted) throw abortedError(`load of ${name} aborted`, signal, { tensor: name });
}

/** What a read that failed once the load's `signal` fired throws: its ABORTED (readExactAbortable's), or one made now. */
function loadAbortedError(error: unknown, signal: AbortSignal, name: string): RuntimeError {
  return isRuntimeError(error, 'ABORTED') ? error : abortedError(`load of ${name} aborted`, signal, { tensor: name });
}

/** A fresh per-tensor report: raw until the cache path succeeds, nothing read or timed yet. */
export function createTensorReport(target: ServeTarget, reason: LoadReason): TensorReport {
  const { name, dtype, shape, slice } = target;
  return {
    name,
    dtype,
    shape,
    source: 'raw',
    reason,
    shardName: slice.shardName,
    offsetBytes: slice.offsetBytes,
    sizeBytes: slice.sizeBytes,
    bytesRead: 0,
    blobBytesRead: 0,
    rawBytesRead: 0,
    bytesProduced: 0,
    ioMs: 0,
    decodeMs: 0,
    digestMs: 0,
    digestVerified: false,
  };
}

/**
 * Serves one tensor into `output` (exactly its size): decoded from the cache when its entry is good,
 * read raw from its shard otherwise. Never returns bytes that failed a check: a failure on the cache
 * path is reported and the tensor is read raw (or, with `cacheOnly`, the typed error is thrown).
 */
export async function serveTensor(env: ServeEnv, target: ServeTarget, given: Uint8Array | undefined): Promise<LoadedTensor> {
  const { name, dtype, shape, slice } = target;
  const report = createTensorReport(target, 'missing');
  abortIfNeeded(env.signal, name);
  // A load whose model was closed under it: no tensor more, cached or raw.
  if (target.model !== undefined) checkModelOpen(target.model, slice.shardName, name);
  if (given === undefined) checkAllocatable(slice.sizeBytes, name);

  const entry = target.entry;
  if (entry !== undefined) {
    report.key = entry.key;
    try {
      const output = await decodeFromCache(env, target, entry, given, report);
      report.source = 'cache';
      report.reason = 'cached';
      report.bytesRead = report.blobBytesRead;
      report.bytesProduced = output.byteLength;
      return { name, dtype, shape, data: output, source: 'cache', reason: 'cached', report };
    } catch (thrown) {
      // Only a cache failure is settled (a raw read, or with no raw source, a bare slice, an error:
      // the cache error, or SLICE_NOT_FOUND for an entry removed since the refresh); others stand.
      if (!(thrown instanceof RuntimeError) || !CACHE_FAILURE_CODES.has(thrown.code)) throw thrown;
      const error = await settleCacheFailure(env, target, entry, nameEntryAndBlob(thrown, target, entry, env.cache), report);
      // A blob whose bytes failed: a local store drops the file it keeps open for it, so the next
      // load opens the path again (a repaired cache is seen). Object stores handle their copies.
      if ((error.code === 'CACHE_READ_FAILED' || error.code === 'CACHE_ENTRY_MISMATCH') && env.cache?.remote === false) {
        await env.cache.discardLocalCopy(entry.key).catch(() => undefined);
      }
    }
  } else if (env.cacheOnly) {
    throw await notCachedError(target, env);
  }

  abortIfNeeded(env.signal, name);
  const output = given ?? new Uint8Array(slice.sizeBytes);
  await readRaw(env, target, output, report);
  if (entry === undefined) await settleMiss(env, target, output, report);
  report.bytesRead = report.blobBytesRead + report.rawBytesRead;
  report.bytesProduced = output.byteLength;
  return { name, dtype, shape, data: output, source: 'raw', reason: report.reason, report };
}

/**
 * What a cache failure of `entry` (named: nameEntryAndBlob) makes of the tensor, on every load path.
 * A blob missing because its entry is gone from the cache (isEntryDropped) is not a failure: the
 * tensor is not cached any more, so it is `missing` (read raw), and with `cacheOnly` `NOT_CACHED`
 * (`reason: 'missing'`), as for any tensor without an entry; no `--repair` hint, which cannot bring
 * back a removed entry. A bare slice (no raw source) whose entry is gone is `SLICE_NOT_FOUND`, as a
 * slice the cache does not have. Any other failure is thrown with `cacheOnly` or without a raw
 * source, else reported `cache-failed`. Returns the error for the caller's clean-up when the tensor
 * is to be read raw.
 */
export async function settleCacheFailure(env: ServeEnv, target: ServeTarget, entry: CacheEntry, error: RuntimeError, report: TensorReport): Promise<RuntimeError> {
  const { name, dtype, slice } = target;
  // Served raw: no backend decoded it (`backend` is the cache source's; a failed decode's backend
  // is named in the error), so `totals.backends` lists only backends that decoded (before
  // 2026-12-07 a backend whose threads never started was listed for tensors it failed).
  delete report.backend;
  const dropped = await isEntryDropped(env.cache, error, entry.key);
  if (target.info === undefined) {
    // A bare slice has nothing to read raw. Its entry gone, the slice is one the cache does not have
    // (decided on the entry, as for a model's tensor; loadTensor and loadTensorToDevice then serve a
    // binding the refresh found to another entry: resolveReboundSlice); any other failure stands.
    if (dropped) throw droppedSliceError(slice, entry.key, error);
    throw nameTensorInError(error, name);
  }
  if (dropped) {
    const why = describeDroppedEntry(entry.key);
    if (env.cacheOnly) throw new RuntimeError('NOT_CACHED', `${name} is not in the cache (${why})`, { tensor: name, dtype, reason: 'missing', key: entry.key, ...slice }, { cause: error });
    report.reason = 'missing';
    report.detail = `${why}: served raw`;
    return error;
  }
  if (env.cacheOnly) throw nameTensorInError(error, name);
  report.reason = 'cache-failed';
  report.error = describeError(error);
  report.detail = describeCacheFailure(error, env.cache);
  return error;
}

/**
 * Why a tensor whose entry the refreshed state lacks is not cached. Every way an entry goes is
 * named, not only the gc: the store removes entries in `dropUnboundEntries` (`splitzip gc
 * --drop-unbound-entries`) and `recoverDamagedManifest` (those it cannot trust), and a cache deleted
 * and built again lacks any its new build did not store.
 */
export function describeDroppedEntry(key: string): string {
  return `its entry ${key} was removed from the cache since this handle's last refresh (by \`splitzip gc --drop-unbound-entries\`, a damaged manifest's recovery, or the cache deleted and built again)`;
}

/**
 * SLICE_NOT_FOUND for a bare slice whose entry was removed since the handle's last refresh: what
 * resolveSlice throws for a slice no entry is bound to, with the removal named (`details.key`).
 */
function droppedSliceError(slice: SliceKey, key: string, cause: RuntimeError): RuntimeError {
  const where = `${slice.shardName}@${slice.offsetBytes}+${slice.sizeBytes}`;
  return new RuntimeError('SLICE_NOT_FOUND', `slice ${where} matches no cache entry (${describeDroppedEntry(key)}), and no model was given to read it raw`, { ...slice, key }, { cause });
}

/**
 * Whether a blob found missing belongs to an entry removed from the cache (describeDroppedEntry)
 * since this handle's state was read: after a refresh the cache no longer holds the key. A refresh
 * that fails says nothing: the failure stands as it was (`cache-failed`). Not asked of an `s3://`
 * cache: its refresh is a listing of the whole prefix, for every blob found missing. Its entries go
 * only by dropUnboundEntries (recoverDamagedManifest is local), and only unbound ones older than
 * its minAgeMs: a handle reaches one only through a binding removed or moved since its view (an
 * unbind, a rebind), and such a load stays `cache-failed`, served raw.
 */
async function isEntryDropped(cache: ShardCache | undefined, error: RuntimeError, key: string): Promise<boolean> {
  if (cache === undefined || cache.remote || error.code !== 'CACHE_READ_FAILED' || error.details.storeCode !== 'BLOB_MISSING') return false;
  try {
    await cache.refresh();
  } catch {
    return false;
  }
  return cache.getEntry(key) === undefined;
}

/**
 * A blob's failure (`CACHE_READ_FAILED`, `CACHE_ENTRY_MISMATCH`) with its entry and blob named, as
 * the store's errors name them: a checksum found wrong while decoding (the decode threads, a
 * backend that verifies as it decodes, a custom reader's bytes) named only the tensor, which may
 * be another name for the entry's bytes. `details.blob` is the blob's path (or s3:// URL).
 */
export function nameEntryAndBlob(error: RuntimeError, target: ServeTarget, entry: CacheEntry, cache: ShardCache | undefined): RuntimeError {
  if ((error.code !== 'CACHE_READ_FAILED' && error.code !== 'CACHE_ENTRY_MISMATCH') || error.details.storeCode === 'STORE_CLOSED') return error;
  const blob = cache?.blobPath(entry);
  const namesEntry = error.message.includes(`cache entry ${entry.key}`);
  const namesBlob = blob === undefined || error.message.includes(blob);
  if (namesEntry && namesBlob && error.details.blob !== undefined) return error;
  const details = { ...error.details, key: entry.key, qualname: entry.qualname, ...(blob === undefined ? {} : { blob }) };
  // An entry that does not describe the tensor (checkEntryDescribesTarget) names the entry in its own
  // words: the manifest disagrees, not the blob, so no blob goes into the message.
  if (namesEntry && !error.message.includes(`cache entry ${entry.key} (${entry.qualname}): `)) {
    return new RuntimeError(error.code, error.message, details, { cause: error.cause ?? error });
  }
  // `<tensor>: cache entry <key> (<qualname>): blob <path>: <what is wrong>`, the parts it lacked added.
  const lead = error.message.startsWith(`${target.name}: `) ? `${target.name}: ` : '';
  const head = `cache entry ${entry.key} (${entry.qualname}): `;
  let body = error.message.slice(lead.length);
  const hadHead = body.startsWith(head);
  if (hadHead) body = body.slice(head.length);
  if (!namesBlob) body = `blob ${blob}: ${body}`;
  if (hadHead || !namesEntry) body = `${head}${body}`;
  return new RuntimeError(error.code, `${lead}${body}`, details, { cause: error.cause ?? error });
}

/**
 * `cacheOnly`'s NOT_CACHED for a tensor without an entry: why (explainMiss, without the raw bytes
 * such a load never reads), and for a tensor that is not BF16, that no build can change it.
 */
export async function notCachedError(target: ServeTarget, env: ServeEnv): Promise<RuntimeError> {
  const { name, dtype, slice } = target;
  const { reason, detail } = await explainMiss(target, undefined, env);
  const why = reason === 'dtype' ? `${detail}: only BF16 tensors are cached, so no build makes it servable with cacheOnly (leave it out, or load it without cacheOnly)` : detail;
  return new RuntimeError('NOT_CACHED', `${name} is not in the cache (${why})`, { tensor: name, dtype, reason, ...slice });
}

/**
 * A cache failure's report detail: the error itself (which blob, what is wrong with it), and for a
 * blob that could not be read or does not match its entry, the build that puts it back (where it
 * can: describeBuildRemedy).
 */
export function describeCacheFailure(error: RuntimeError, cache: ShardCache | undefined): string {
  // A handle closed under the load (the store's STORE_CLOSED) says nothing about the blob.
  if (error.details.storeCode === 'STORE_CLOSED') {
    return `${error.code}: ${error.message}: served raw; the cache handle was closed (\`cache.close()\`) while this load still read from it: nothing is wrong with the cache, and a load through an open handle serves the tensor from it`;
  }
  const repair =
    error.code === 'CACHE_READ_FAILED' || error.code === 'CACHE_ENTRY_MISMATCH'
      ? `; if its blob is missing or damaged, ${describeBuildRemedy(cache, '`splitzip build <model> --out <cache> --repair` puts it back')}`
      : '';
  return `${error.code}: ${error.message}: served raw${repair}`;
}

/** Why a tensor without an entry was read raw; an unchecked binding is checked against the bytes read. */
export async function settleMiss(env: ServeEnv, target: ServeTarget, data: Uint8Array, report: TensorReport): Promise<void> {
  // Each step of a tensor's work on this thread first lets the event loop turn when a turn is due (takeTurnIfDue).
  for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
  if (target.unchecked !== undefined && env.cache !== undefined) {
    await checkSourceBytes(env.cache, env.backend, target, target.unchecked, data, report, objectRefetch(env, target, data, report), env.signal);
    return;
  }
  const { reason, detail } = await explainMiss(target, data, env);
  report.reason = reason;
  report.detail = detail;
}

/** How a raw read of an s3:// model's tensor is made again past its read-through copy (checkSourceBytes); undefined for other models. */
function objectRefetch(env: ServeEnv, target: ServeTarget, data: Uint8Array, report: TensorReport): SourceRefetch | undefined {
  const { model, slice } = target;
  if (model === undefined || target.info === undefined || !isRemoteLocation(target.info.shardPath)) return undefined;
  const dropCopy = () => dropModelRangeCopy(model, slice.shardName, slice.offsetBytes, slice.sizeBytes);
  return {
    async refetch() {
      if (!(await dropCopy())) return false;
      await readRaw(env, target, data, report);
      return true;
    },
    async dropCopy() {
      await dropCopy();
    },
    async reportDamage() {
      await reportModelRangeDamage(model, slice.shardName, slice.offsetBytes, slice.sizeBytes);
    },
  };
}

export async function readRaw(env: ServeEnv, target: ServeTarget, output: Uint8Array, report: TensorReport): Promise<void> {
  const { name, slice } = target;
  if (target.model === undefined || target.info === undefined) {
    throw new RuntimeError('SHARD_NOT_FOUND', `no model to read ${name} raw from: shard ${slice.shardName} is unknown here`, {
      tensor: name,
      ...slice,
    });
  }
  const info = target.info;
  for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
  const granted = acquireWindow(env, output.byteLength);
  const releaseWindow = granted instanceof Promise ? await granted : granted;
  const startMs = performance.now();
  try {
    // The reader seam is for local files; a model opened from a ByteSource (s3://…) reads through it.
    if (env.reader !== undefined && !isRemoteLocation(info.shardPath)) {
      // Ended by the load's abort even where the reader ignores the signal: a caller's buffer may
      // then still be written into by that read (README, `signal`); a buffer of the runtime's own
      // is dropped with the load.
      await readExactAbortable(env.reader, info.shardPath, output, slice.offsetBytes, env.signal, name).done;
      // readTensorBytes checks the model's descriptor after its reads; a custom reader opens the
      // path, which a rename may have pointed at another file: the bytes read came from that one.
      checkShardUnchanged(target.model, slice.shardName, name);
      checkShardPathUnchanged(target.model, slice.shardName, info.shardPath, name);
    } else await readTensorBytes(target.model, info, output);
  } catch (error) {
    if (isRuntimeError(error, 'SHARD_CHANGED') || isRuntimeError(error, 'MODEL_CLOSED')) throw error;
    // The load's abort; a reader's own ABORTED (its own timeout) is a read that failed, as any.
    if (env.signal?.aborted === true) throw loadAbortedError(error, env.signal, name);
    const { code, message } = describeError(error);
    // The model was closed during the read (closed before it: checkModelOpen above).
    if (code === 'MODEL_CLOSED') throw modelClosedError(target.model, name, error);
    if (code === 'SHARD_CHANGED') {
      throw new RuntimeError('SHARD_CHANGED', `cannot read ${name}: ${message}`, { tensor: name, shard: slice.shardName, path: info.shardPath }, { cause: error });
    }
    throw new RuntimeError('SHARD_READ_FAILED', `cannot read ${name} from shard ${info.shardPath}: ${message}`, {
      tensor: name,
      shard: slice.shardName,
      path: info.shardPath,
      offsetBytes: slice.offsetBytes,
      sizeBytes: slice.sizeBytes,
      causeCode: code,
      retryable: isRetryableError(error),
    }, { cause: error });
  } finally {
    releaseWindow?.();
  }
  report.ioMs += performance.now() - startMs;
  report.rawBytesRead += output.byteLength;
}

/** `s3://…` and other URL-like locations (not local paths). */
export function isRemoteLocation(location: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(location);
}

/** A payload read into staging and validated; `release()` gives the staging slot back (idempotent). */
export interface StagedPayload {
  payload: Uint8Array;
  meta: PayloadMeta;
  release(): void;
  /** As `release`, once `settled` settles: a decode the load's abort left behind may still read the slot (quarantined). */
  releaseWhenSettled(settled: Promise<unknown>): void;
  /** True when the checksum is left to the decode backend (it verifies it while decoding). */
  checksumPending: boolean;
  /** The codec arena of the staging slot holding `payload`, if any. */
  arena: CodecArena | undefined;
}

/** Refuses an entry that does not describe this very tensor, before any of its bytes are trusted. */
function checkEntryDescribesTarget(target: ServeTarget, entry: CacheEntry): void {
  const { name, slice } = target;
  if (!entryDescribesTensor(entry, target)) {
    throw new RuntimeError(
      'CACHE_ENTRY_MISMATCH',
      `cache entry ${entry.key} (${entry.dtype} ${JSON.stringify(entry.shape)}, ${entry.rawBytes} B) does not describe ${name} (${target.dtype} ${JSON.stringify(target.shape)}, ${slice.sizeBytes} B)`,
      { tensor: name, key: entry.key, qualname: entry.qualname },
    );
  }
}

/**
 * A place in the load's read window for `bytes`: granted at once when it can be (see
 * ReadWindow.tryAcquire), awaited otherwise; undefined when the load has no window.
 */
function acquireWindow(env: ServeEnv, bytes: number): (() => void) | undefined | Promise<() => void> {
  const window = env.readWindow;
  if (window === undefined) return undefined;
  return window.tryAcquire(bytes) ?? window.acquire(bytes, env.signal);
}

/** Where a payload is staged: a pool slot (or a buffer of its own), how to give it back, its codec arena. */
interface Stage {
  stage: Uint8Array;
  /** Gives the slot back to the pool (idempotent; nothing for a buffer of its own). */
  release(): void;
  /** As `release`, once `settled` settles: a read left in flight may write into the slot until then (quarantined: the pool's stats count it). */
  releaseWhenSettled(settled: Promise<void>): void;
  arena: CodecArena | undefined;
}

/**
 * Takes staging memory for `entry`'s payload: a slot of the pool, or a buffer of its own (small or
 * oversized payloads). Synchronous unless it must wait for a slot (see acquireWindow for why).
 */
function takeStage(env: ServeEnv, entry: CacheEntry): Stage | Promise<Stage> {
  const pool = env.pool;
  // Values a shared-memory backend decodes on the calling thread (anything, for the others).
  const inlineBelowValues = env.backend.shared === true ? (env.backend.inlineMaxValues ?? 0) : Infinity;
  if (pool !== undefined && entry.compBytes <= SMALL_PAYLOAD_MAX_BYTES && pool.slotBytes >= LARGE_SLOT_MIN_BYTES && entry.rawBytes / 2 < inlineBelowValues) {
    return { stage: allocateAligned(entry.compBytes), release: () => undefined, releaseWhenSettled: () => undefined, arena: undefined };
  }
  if (pool === undefined || entry.compBytes > pool.slotBytes) {
    env.onStagingOverflow();
    return { stage: allocateAligned(entry.compBytes), release: () => undefined, releaseWhenSettled: () => undefined, arena: undefined };
  }
  const stageOf = (taken: StagingSlot): Stage => {
    let slot: StagingSlot | undefined = taken;
    const giveUp = (): StagingSlot | undefined => {
      const held = slot;
      slot = undefined;
      return held;
    };
    return {
      stage: taken.bytes,
      release: () => {
        const held = giveUp();
        if (held !== undefined) pool.release(held);
      },
      releaseWhenSettled: (settled) => {
        const held = giveUp();
        if (held !== undefined) releaseStagingSlotWhenSettled(pool, held, settled);
      },
      arena: pool.arena,
    };
  };
  // Sized: the payload goes to a slot whose memory a payload this large already touched.
  if (env.signal?.aborted !== true) {
    const slot = pool.tryAcquire(entry.compBytes);
    if (slot !== undefined) return stageOf(slot);
  }
  return pool.acquire(env.signal ? { signal: env.signal, bytes: entry.compBytes } : { bytes: entry.compBytes }).then(stageOf);
}

/**
 * Takes a staging slot, reads the entry's payload into it (the store's readBlob, or the custom
 * reader followed by the same checks) and validates it. On failure the slot is already released.
 */
export async function stagePayload(
  env: ServeEnv,
  target: ServeTarget,
  entry: CacheEntry,
  report: TensorReport,
  options: { storeVerifies?: boolean } = {},
): Promise<StagedPayload> {
  checkEntryDescribesTarget(target, entry);
  const cache = env.cache as ShardCache;
  const confirming = confirmOwnStage(env, entry, target);
  if (confirming !== undefined) await confirming;
  // A backend that verifies while decoding gets the checksum (one pass over the payload, not two),
  // unless the caller asks for the store's check (a retry after a local copy failed it).
  const backendVerifies = env.backend.verifiesChecksum === true && options.storeVerifies !== true;
  const context = { tensor: target.name, key: entry.key, qualname: entry.qualname };
  // Small local blobs: one blocking read beats four thread-pool round trips (open, stat, read, close).
  const readSync = env.reader === undefined && cache.readBlobSync !== undefined && entry.compBytes <= env.syncReadMaxBytes;
  // The read's place in the window first, then its staging slot: a slot is taken only when its
  // read can start. Taken first, every slot sat under a read queued for the window, so a payload
  // got whichever slot came free next, not one a payload of its size had touched (the 1.07 GB
  // model's last 25 MB payload faulted in ~19 MB of fresh slot memory on each paced load, 40-50 ms).
  // A synchronous read is over before anything else runs: it needs no place in the window.
  let releaseWindow: (() => void) | undefined;
  if (!readSync) {
    const granted = acquireWindow(env, entry.compBytes);
    releaseWindow = granted instanceof Promise ? await granted : granted;
  }
  let taken: Stage;
  try {
    const staging = takeStage(env, entry);
    taken = staging instanceof Promise ? await staging : staging;
  } catch (error) {
    releaseWindow?.();
    throw error;
  }
  const { stage, arena } = taken;
  // A custom reader's read that the load's abort left behind (it ignores the signal): the slot is
  // quarantined, given back to the pool only once that read has settled, never while it may still write.
  let unsettledRead: Promise<void> | undefined;
  const release = () => {
    if (unsettledRead === undefined) taken.release();
    else taken.releaseWhenSettled(unsettledRead);
  };
  const releaseWhenSettled = (settled: Promise<unknown>) => {
    taken.releaseWhenSettled(unsettledRead === undefined ? settled.then(() => undefined) : Promise.all([unsettledRead, settled]).then(() => undefined));
  };
  try {
    let payload: Uint8Array;
    let meta: PayloadMeta;
    // A read that settles at once: a turn first when one is due (not counted as I/O).
    if (readSync) {
      for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
    }
    const ioStartMs = performance.now();
    if (env.reader !== undefined && !cache.remote) {
      const blobPath = cache.blobPath(entry);
      payload = stage.subarray(0, entry.compBytes);
      const reading = readExactAbortable(env.reader, blobPath, payload, 0, env.signal, target.name);
      unsettledRead = reading.settled;
      try {
        await reading.done;
        unsettledRead = undefined;
      } catch (error) {
        // The load's abort: the read may be in flight still. A reader's own ABORTED (its own
        // timeout) is a read that failed, and settled, as any.
        if (env.signal?.aborted === true) throw loadAbortedError(error, env.signal, target.name);
        unsettledRead = undefined;
        throw new RuntimeError('CACHE_READ_FAILED', `cannot read blob ${blobPath}: ${describeError(error).message}`, { ...context, blob: blobPath }, {
          cause: error,
        });
      } finally {
        releaseWindow?.();
      }
      report.ioMs += performance.now() - ioStartMs;
      report.blobBytesRead += payload.byteLength;
      const checkStartMs = performance.now();
      meta = checkPayloadAgainstEntry(payload, entry, blobPath, { checksum: !backendVerifies });
      report.decodeMs += performance.now() - checkStartMs;
    } else {
      try {
        const readOptions = { verifyChecksum: !backendVerifies };
        payload = readSync ? cache.readBlobSync!(entry.key, stage, readOptions) : await cache.readBlob(entry.key, stage, readOptions);
      } catch (error) {
        throw mapStoreError(error, entry, target.name);
      } finally {
        releaseWindow?.();
      }
      // The store's readBlob may include its checksum pass; it is counted as I/O here.
      report.ioMs += performance.now() - ioStartMs;
      report.blobBytesRead += payload.byteLength;
      meta = readPayloadMeta(payload);
    }
    if (meta.elementCount * 2 !== target.slice.sizeBytes) {
      // Worded to follow the entry and blob that nameEntryAndBlob puts in front of it.
      throw new RuntimeError('CACHE_ENTRY_MISMATCH', `its payload holds ${meta.elementCount} values, ${target.name} has ${target.slice.sizeBytes / 2}`, context);
    }
    abortIfNeeded(env.signal, target.name);
    // Left to the backend: bytes the runtime read itself, and blobs the store read unverified for it.
    return { payload, meta, release, releaseWhenSettled, arena, checksumPending: backendVerifies };
  } catch (error) {
    releaseWindow?.();
    release();
    throw error;
  }
}

/**
 * Throws DIGEST_MISMATCH unless `bytes` hash to the entry's content key (the SHA-1 of shape, dtype,
 * length and the original bytes that found the entry): one pass, and every entry has one, while
 * the manifest's SHA-256 of the original bytes is optional (store CacheEntry.sha256). Hashed on a
 * decode thread where the backend has one (hashTensorKey).
 */
export async function checkDigest(backend: DecodeBackend, bytes: Uint8Array, entry: CacheEntry, target: ServeTarget, report: TensorReport, signal?: AbortSignal): Promise<void> {
  for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
  const { key: actual, cpuMs } = await hashTensorKey(backend, bytes, entry.shape, entry.dtype, signal, target.name);
  report.digestMs += cpuMs;
  if (actual !== entry.key) {
    throw new RuntimeError('DIGEST_MISMATCH', `${target.name}: decoded bytes have content key ${actual}, the entry is ${entry.key}`, {
      tensor: target.name,
      key: entry.key,
      qualname: entry.qualname,
      expected: entry.key,
      actual,
    });
  }
  report.digestVerified = true;
}

/** A decode backend's failure, with the tensor's context (a cache failure keeps its code: the tensor falls back to raw). */
function describeDecodeFailure(error: unknown, env: ServeEnv, target: ServeTarget, entry: CacheEntry): RuntimeError {
  const { name } = target;
  if (error instanceof RuntimeError && CACHE_FAILURE_CODES.has(error.code)) {
    return new RuntimeError(error.code, `${name}: ${error.message}`, { ...error.details, tensor: name, key: entry.key, qualname: entry.qualname }, {
      cause: error,
    });
  }
  // A backend may throw anything, null included: the failure is reported all the same.
  const message = error instanceof Error ? error.message : String(error);
  return new RuntimeError('DECODE_FAILED', `decode backend ${env.backend.name} failed on ${name}: ${message}`, {
    tensor: name,
    key: entry.key,
    qualname: entry.qualname,
    backend: env.backend.name,
  }, { cause: error });
}

/** Decodes the tensor from its entry into `given`, or into a buffer of its own when absent; returns the bytes. */
async function decodeFromCache(
  env: ServeEnv,
  target: ServeTarget,
  entry: CacheEntry,
  given: Uint8Array | undefined,
  report: TensorReport,
  storeVerifies = false,
): Promise<Uint8Array> {
  // Bytes this runtime reads itself (a custom reader: a paced link, network storage) may be decoded as they arrive.
  const layout = env.reader !== undefined && env.cache?.remote !== true ? planStreamedDecode(entry, env.backend) : undefined;
  // Decided before anything waits: a tensor the decode threads decline starts its read now, in order.
  const onThread = layout === undefined && !storeVerifies ? startDecodeOnThread(env, target, entry, given, report) : undefined;
  let output: Uint8Array;
  if (onThread !== undefined) {
    output = await onThread;
  } else if (layout !== undefined) {
    output = given ?? new Uint8Array(target.slice.sizeBytes);
    await decodeFromCacheStreamed(env, target, entry, layout, output, report);
  } else {
    output = await decodeFromCacheStaged(env, target, entry, given, report, storeVerifies);
  }
  if (env.verifyDigest) await checkDigest(env.backend, output, entry, target, report, env.signal);
  return output;
}

/** A view of `output` as BF16 values when its offset allows (decoded in place), else a temporary array to copy from. */
function valuesFor(output: Uint8Array): { values: Uint16Array; direct: boolean } {
  const direct = output.byteOffset % 2 === 0;
  return {
    values: direct ? new Uint16Array(output.buffer, output.byteOffset, bf16ValueCount(output.byteLength)) : new Uint16Array(bf16ValueCount(output.byteLength)),
    direct,
  };
}

/**
 * Before takeStage allocates a stage of its own (no pool, or a payload larger than its slots) above
 * CONFIRM_BLOB_ABOVE_BYTES: the store confirms the blob has the entry's size (CONFIRM_BLOB_ABOVE_BYTES says why).
 */
function confirmOwnStage(env: ServeEnv, entry: CacheEntry, target: ServeTarget): Promise<void> | undefined {
  const checkBlob = env.cache?.checkBlob;
  // Synchronous when there is nothing to check: a wait here reordered the reads of a load (the
  // largest payload's read is asked first; read-window.test.ts).
  if (checkBlob === undefined || entry.compBytes <= CONFIRM_BLOB_ABOVE_BYTES || (env.pool !== undefined && entry.compBytes <= env.pool.slotBytes)) return undefined;
  return checkBlob(entry.key).catch((error: unknown) => {
    throw mapStoreError(error, entry, target.name);
  });
}

/** The streamed cache path (decode-streamed-payload.ts): reads in segment order, each segment decoded as it arrives. */
async function decodeFromCacheStreamed(
  env: ServeEnv,
  target: ServeTarget,
  entry: CacheEntry,
  layout: PayloadLayout,
  output: Uint8Array,
  report: TensorReport,
): Promise<void> {
  checkEntryDescribesTarget(target, entry);
  const confirming = confirmOwnStage(env, entry, target);
  if (confirming !== undefined) await confirming;
  const taken = takeStage(env, entry);
  const staged = taken instanceof Promise ? await taken : taken;
  const { stage } = staged;
  let releaseWindow: (() => void) | undefined;
  // Reads an abort left in flight (a reader that ignores the signal): the slot waits for them.
  let unsettledReads: Promise<void> | undefined;
  try {
    const granted = acquireWindow(env, entry.compBytes);
    releaseWindow = granted instanceof Promise ? await granted : granted;
    const { values, direct } = valuesFor(output);
    const blobPath = (env.cache as ShardCache).blobPath(entry);
    report.backend = env.backend.name;
    report.streamed = true;
    const payload = stage.subarray(0, entry.compBytes);
    const { decodeMs, ioMs } = await decodeStreamedPayload(env.reader as ByteReader, blobPath, payload, entry, layout, values, target.name, env.signal, (settled) => {
      unsettledReads = settled;
    }).finally(() => {
      report.blobBytesRead += entry.compBytes;
    });
    report.ioMs += ioMs;
    report.decodeMs += decodeMs;
    if (!direct) output.set(new Uint8Array(values.buffer, 0, output.byteLength));
  } finally {
    releaseWindow?.();
    if (unsettledReads === undefined) staged.release();
    else staged.releaseWhenSettled(unsettledReads);
  }
}

/**
 * A local cache's blob read and decoded on a decode thread (DecodeBackend.readDecode): this thread
 * opens the blob with the store's checks (into the staging slot the thread keeps), the thread
 * reads it, checks its header against the manifest entry and decodes it with its checksum
 * verified. Undefined, having done nothing, when the backend or the cache cannot (the caller takes
 * the staged path).
 */
function startDecodeOnThread(env: ServeEnv, target: ServeTarget, entry: CacheEntry, given: Uint8Array | undefined, report: TensorReport): Promise<Uint8Array> | undefined {
  const { backend, cache, pool } = env;
  // A custom reader is the runtime's own I/O (a paced link): its bytes are read on this thread.
  if (backend.readDecode === undefined || env.reader !== undefined || cache === undefined || cache.remote) return undefined;
  const openBlob = cache.openBlobSync;
  // A tensor the backend decodes on this thread anyway needs none of what follows; the threads
  // keep slots of the load's pool, so a payload too large for them takes the staged path.
  if (openBlob === undefined || pool === undefined || entry.compBytes > pool.slotBytes || entry.rawBytes / 2 < (backend.inlineMaxValues ?? 0)) return undefined;
  checkEntryDescribesTarget(target, entry);
  // No buffer from the caller: the decode thread allocates one and hands it over, so its pages are
  // first written there and nothing is copied here (a fresh buffer filled from shared scratch on
  // this thread took 2.5 s of a 1.07 GB model's first load, its page faults included).
  const view = given === undefined ? undefined : valuesFor(given);
  const valueCount = bf16ValueCount(target.slice.sizeBytes);
  let opened: OpenedBlob | undefined;
  let openMs = 0;
  const open = (lease: StagingLease): OpenedPayloadFile => {
    abortIfNeeded(env.signal, target.name);
    const openStartMs = performance.now();
    try {
      opened = openBlob(entry.key, lease.bytes);
    } catch (error) {
      throw mapStoreError(error, entry, target.name);
    }
    openMs = performance.now() - openStartMs;
    return { fd: opened.fd, payload: opened.view, out: view?.values, arena: lease.arena, check: { entry: entryFields(entry), blobPath: opened.path } };
  };
  let running: Promise<ReadDecodeResult> | undefined;
  try {
    running = backend.readDecode({ values: valueCount, staging: threadStaging(pool), open, signal: env.signal });
  } catch (error) {
    // A backend that refuses at once (closed by its owner mid-load) fails like any decode: the tensor goes raw.
    throw describeDecodeFailure(error, env, target, entry);
  }
  if (running === undefined) return undefined;
  report.backend = backend.name;
  // A custom backend's read that ignores the signal (or never settles) is not waited for once it
  // fires, as its decode is not: the blob it may still read is closed when it settles; the slot it
  // holds is the backend's (taken from the pool through `staging`) until then.
  let abandoned = false;
  const raced = settleUnlessAborted(running, isSettlingBackend(backend) ? undefined : env.signal, target.name, (settled) => {
    abandoned = true;
    void settled.then(() => opened?.close());
  });
  return Promise.resolve(raced).then(
    (result) => {
      // The header was checked against the manifest and the checksum verified on the thread: the
      // file may stay open for the blob's next read.
      opened?.release();
      report.blobBytesRead += entry.compBytes;
      let output: Uint8Array;
      if (given === undefined) {
        const values = result.values;
        if (values === undefined || values.byteLength !== target.slice.sizeBytes) {
          throw new RuntimeError('DECODE_FAILED', `decode backend ${backend.name} returned no buffer of ${target.name}'s size`, { tensor: target.name, key: entry.key });
        }
        output = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
      } else {
        output = given;
        if (view !== undefined && !view.direct) output.set(new Uint8Array(view.values.buffer, 0, output.byteLength));
      }
      report.ioMs += openMs + result.readMs;
      report.decodeMs += result.decodeMs;
      abortIfNeeded(env.signal, target.name);
      return output;
    },
    (error: unknown) => {
      if (abandoned) throw error; // ABORTED; the backend's read may still use the blob
      opened?.close();
      // Not opened: the store's checks refused the blob (already mapped), or the load was aborted.
      if (opened === undefined) {
        abortIfNeeded(env.signal, target.name);
        // The backend's threads died before this read went to one (its threads failed to start):
        // nothing was read, so the payload is staged here and decoded by what the backend has left
        // (the thread decoder's calling thread), not served raw.
        if ((error as { code?: unknown } | null)?.code === 'WORKER_FAILED') return decodeFromCacheStaged(env, target, entry, given, report, false);
        // The store's refusals arrive mapped (kept as they are), and the caller's closed pool is the
        // caller's error (as on the other backends); anything else (a read the closed backend
        // dropped) is the backend's failure.
        const passThrough = isRuntimeError(error) && (error.code === 'ABORTED' || error.code === 'POOL_CLOSED' || error.code === 'POOL_WAIT_TIMEOUT' || CACHE_FAILURE_CODES.has(error.code));
        throw passThrough ? error : describeDecodeFailure(error, env, target, entry);
      }
      report.blobBytesRead += entry.compBytes;
      // A file that ended early, or could not be read, is the blob's fault.
      throw isBlobReadFailure(error) ? mapStoreError(error, entry, target.name) : describeDecodeFailure(error, env, target, entry);
    },
  );
}

/** The manifest fields a blob's header must repeat, as a plain object (posted to a decode thread). */
function entryFields(entry: CacheEntry): PayloadEntryFields {
  return { key: entry.key, qualname: entry.qualname, compBytes: entry.compBytes, rawBytes: entry.rawBytes, meta: entry.meta, codebook: entry.codebook };
}

/** One staging source per pool: the decode threads' slots are taken from it, and kept across tensors. */
const threadStagings = new WeakMap<StagingPool, ReadDecodeStaging>();

function threadStaging(pool: StagingPool): ReadDecodeStaging {
  let staging = threadStagings.get(pool);
  if (staging === undefined) {
    const stagingOf = (slot: StagingSlot): StagingLease => {
      let held: StagingSlot | undefined = slot;
      return {
        bytes: slot.bytes,
        arena: pool.arena,
        release: () => {
          if (held === undefined) return;
          const giving = held;
          held = undefined;
          pool.release(giving);
        },
      };
    };
    staging = {
      source: pool,
      // A slot for any payload of the pool (its largest); not tied to one load's abort signal,
      // since a thread keeps it for the tensors of every load that shares the pool.
      // The most recently released slot: the one most likely still in the CPU's caches.
      take: (signal, slotWaitMs) => {
        const slot = pool.tryAcquire();
        return slot !== undefined ? stagingOf(slot) : pool.acquire({ signal, ...(slotWaitMs === undefined ? {} : { slotWaitMs }) }).then(stagingOf);
      },
    };
    threadStagings.set(pool, staging);
  }
  return staging;
}

/** A decode thread's read that failed (the file ended early, or an I/O error), not its decode. */
function isBlobReadFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'BLOB_SIZE_MISMATCH' || (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code));
}

/**
 * Settles once every promise in `held` has, counting those pushed while it waits: a backend calls
 * onAbandoned before its decode rejects, which may be after the load's abort already handed the
 * slot to this wait (settleUnlessAborted's promise, first in `held`, settles only after it).
 */
async function settleEvery(held: readonly Promise<unknown>[]): Promise<void> {
  for (let k = 0; k < held.length; k++) await held[k]!.then(
    () => undefined,
    () => undefined,
  );
}

async function decodeFromCacheStaged(
  env: ServeEnv,
  target: ServeTarget,
  entry: CacheEntry,
  given: Uint8Array | undefined,
  report: TensorReport,
  storeVerifies: boolean,
): Promise<Uint8Array> {
  const staged = await stagePayload(env, target, entry, report, { storeVerifies });
  let retry = false;
  // A decode the load's abort left behind (a backend that never settles, or ignores the abort), or
  // one that stopped on the signal while its threads still use the payload (onAbandoned): the slot
  // is quarantined until all of them settle, as for a custom reader's read (stagePayload).
  const abandoned: Promise<unknown>[] = [];
  const abandon = (settled: Promise<unknown>) => {
    abandoned.push(settled);
  };
  // The runtime's own backends always settle, and may write into the caller's buffer until they
  // do: the abort waits for them (no buffer is handed back while a decode still writes into it).
  const unsettledSignal = isSettlingBackend(env.backend) ? undefined : env.signal;
  let output = given;
  try {
    for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
    const decodeStartMs = performance.now();
    report.backend = env.backend.name;
    const options: DecodeCallOptions = { verifyChecksum: staged.checksumPending, arena: staged.arena, signal: env.signal, onAbandoned: abandon };
    let busyMs: void | number = undefined;
    try {
      // No caller's buffer: a backend that decodes on its threads may allocate it there (its pages
      // first written there, nothing copied on this thread).
      const onThread = output === undefined ? env.backend.decodeToNew?.(staged.payload, staged.meta, options) : undefined;
      if (onThread !== undefined) {
        const decoded = await settleUnlessAborted(onThread, unsettledSignal, target.name, abandon);
        if (decoded.values.byteLength !== target.slice.sizeBytes) {
          throw new RuntimeError('DECODE_FAILED', `decode backend ${env.backend.name} returned ${decoded.values.byteLength} bytes for ${target.name}`, {
            tensor: target.name,
            sizeBytes: target.slice.sizeBytes,
          });
        }
        output = new Uint8Array(decoded.values.buffer, decoded.values.byteOffset, decoded.values.byteLength);
        busyMs = decoded.busyMs;
      } else {
        // Straight into the caller's buffer when it can be viewed as BF16 values (even offset).
        output ??= new Uint8Array(target.slice.sizeBytes);
        const { values, direct } = valuesFor(output);
        busyMs = await settleUnlessAborted(env.backend.decode(staged.payload, staged.meta, values, options), unsettledSignal, target.name, abandon);
        if (!direct) output.set(new Uint8Array(values.buffer, 0, output.byteLength));
      }
    } catch (error) {
      // The backend stopped on the load's signal (or failed as it fired): the load's own ABORTED.
      if (env.signal?.aborted === true) throw loadAbortedError(error, env.signal, target.name);
      if (abandoned.length > 0) throw error;
      if (!(staged.checksumPending && env.cache?.remote === true && error instanceof RuntimeError && error.code === 'CACHE_READ_FAILED')) {
        throw describeDecodeFailure(error, env, target, entry);
      }
      // The object store handed its bytes over unchecked (this decode verifies): a host-local copy
      // that fails the checksum is dropped and the blob read once more, checked by the store.
      await env.cache.discardLocalCopy(entry.key).catch(() => undefined);
      retry = true;
    }
    if (!retry) {
      report.decodeMs += typeof busyMs === 'number' ? busyMs : performance.now() - decodeStartMs;
      // Named again: a name may change in the decode (a worker pool whose workers died as they
      // started: that decode counted them, and the calling thread decoded the tensor alone).
      report.backend = env.backend.name;
    }
  } finally {
    if (abandoned.length === 0) staged.release();
    else staged.releaseWhenSettled(settleEvery(abandoned));
  }
  if (retry) return decodeFromCacheStaged(env, target, entry, given, report, true);
  return output as Uint8Array;
}
