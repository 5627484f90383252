import type { SafetensorsModel } from '@splitzip/safetensors';
import type { ByteReader } from './create-file-reader.js';
import type { StagingPool } from './create-staging-pool.js';
import type { ShardCache } from './open-shard-cache.js';
import { checkBackendOpen, ownsDecodeBackend, resolveDecodeBackend, type BackendOption } from './resolve-decode-backend.js';
import { resolveTensorRequest, type TensorRequest } from './resolve-tensor-request.js';
import { resolveReboundSlice } from './resolve-rebound-slice.js';
import { checkOutputBuffer, serveTensor, DEFAULT_SYNC_READ_MAX_BYTES, type ServeEnv } from './serve-tensor.js';
import type { LoadedTensor } from './types.js';
import { checkBooleanArgument, checkByteCountArgument, checkCacheArgument, checkCacheOnlyHasCache, checkModelArgument, checkOptionsArgument, checkPoolArgument, checkReaderArgument, checkSignalArgument, optionNames } from './check-load-arguments.js';
import { linkAbortSignal } from './link-abort-signal.js';

/** LoadTensorOptions' names (loadTensorToDevice's are these less backend, plus kernels). */
export const LOAD_TENSOR_OPTION_NAMES: Record<keyof LoadTensorOptions, true> = {
  syncReadMaxBytes: true,
  cache: true,
  model: true,
  target: true,
  pool: true,
  reader: true,
  backend: true,
  verifyDigest: true,
  cacheOnly: true,
  explainMisses: true,
  signal: true,
};
const LOAD_TENSOR_OPTIONS = optionNames<LoadTensorOptions>(LOAD_TENSOR_OPTION_NAMES);

/** The options loadTensor and loadTensorToDevice share, checked before any work (`known`: the caller's option names). */
export function checkLoadTensorOptions(options: LoadTensorOptions, known: readonly string[] = LOAD_TENSOR_OPTIONS): void {
  checkOptionsArgument(options, known);
  for (const option of ['verifyDigest', 'cacheOnly', 'explainMisses'] as const) checkBooleanArgument(options[option], option);
  checkCacheArgument(options.cache);
  checkCacheOnlyHasCache(options.cacheOnly, options.cache, 'pass it as the cache option, { cache, cacheOnly: true }');
  // Named as the request's model is (`request.model`): one wording for both places a model goes.
  if (options.model !== undefined) checkModelArgument(options.model, 'options.model');
  checkPoolArgument(options.pool);
  checkReaderArgument(options.reader);
  checkSignalArgument(options.signal);
  checkByteCountArgument(options.syncReadMaxBytes, 'syncReadMaxBytes');
}

export interface LoadTensorOptions {
  /** Read blobs up to this many bytes synchronously from a local cache (see LoadModelOptions). */
  syncReadMaxBytes?: number | undefined;
  /** The cache to try first. Without one (or null), the tensor is read raw. */
  cache?: ShardCache | null | undefined;
  /** For a bare slice: the model that owns the shard (needed for the raw fallback). */
  model?: SafetensorsModel | undefined;
  /** Where to put the bytes (at least the tensor's size; the result's `data` is a view of it). */
  target?: Uint8Array | undefined;
  /** Staging slots for payloads; without one a payload buffer is allocated for this call. */
  pool?: StagingPool | undefined;
  /** Custom I/O for both the blob and the raw read (e.g. the pacing reader). */
  reader?: ByteReader | undefined;
  backend?: BackendOption | undefined;
  /** Check the decoded bytes against their content key (SHA-1 of shape, dtype and the original bytes). */
  verifyDigest?: boolean | undefined;
  /** Throw (typed) instead of falling back to the raw shard. */
  cacheOnly?: boolean | undefined;
  /** For a BF16 tensor with no entry, compute its exponent coverage to tell `coverage` from `missing`. Default true. */
  explainMisses?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Loads one tensor: decoded from the cache when its slice has a good entry, read raw from its
 * safetensors shard otherwise. See serveTensor for the failure rules.
 */
export async function loadTensor(request: TensorRequest, options: LoadTensorOptions = {}): Promise<LoadedTensor> {
  checkLoadTensorOptions(options);
  const cache = options.cache ?? undefined; // null: no cache, as for loadModel
  const target = resolveTensorRequest(request, options.model, cache);
  const output = checkOutputBuffer(options.target, target.slice.sizeBytes, target.name);
  const backend = resolveDecodeBackend(options.backend);
  checkBackendOpen(backend);
  // A backend made here from a name is closed here, as loadModel does ('threads' is the
  // process-wide pool, kept): 'workers' left a worker pool behind on every call before (a
  // thread, four descriptors and ~8 MiB each).
  const ownBackend = ownsDecodeBackend(options.backend, backend);
  // One listener on the caller's signal for every load following it (a server passing one
  // shutdown signal to many concurrent loadTensor calls passed Node's limit of 10 and warned).
  const linked = linkAbortSignal(options.signal);
  try {
    const env: ServeEnv = {
      cache,
      pool: options.pool,
      reader: options.reader,
      backend,
      verifyDigest: options.verifyDigest ?? false,
      cacheOnly: options.cacheOnly ?? false,
      explainMisses: options.explainMisses ?? true,
      signal: linked.signal,
      onStagingOverflow: () => undefined,
      syncReadMaxBytes: options.syncReadMaxBytes ?? DEFAULT_SYNC_READ_MAX_BYTES,
    };
    try {
      return await serveTensor(env, target, output);
    } catch (error) {
      // A bare slice whose entry went, bound to another entry by now: served from that one, once.
      const again = resolveReboundSlice(error, request, options.model, cache);
      if (again === undefined) throw error;
      return await serveTensor(env, again, output);
    }
  } finally {
    linked.unlink();
    if (ownBackend) await backend.close?.();
  }
}
