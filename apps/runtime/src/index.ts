export {
  RuntimeError,
  isRuntimeError,
  isRetryableError,
  describeError,
  CACHE_FAILURE_CODES,
  type RuntimeErrorCode,
} from './errors.js';
export { StoreError, isStoreError, type StoreErrorCode } from '@splitzip/store';
// Types a loader names (a dtype map, a model or slice passed around) without depending on @splitzip/safetensors itself (pnpm's strict node_modules).
export type { SafetensorsDtype, SafetensorsModel, SliceKey, TensorInfo } from '@splitzip/safetensors';
export {
  createStagingPool,
  STAGING_ALIGN_BYTES,
  MAX_POOL_ARENA_BYTES,
  MAX_SLOT_BYTES,
  MAX_SLOT_COUNT,
  MAX_SLOT_WAIT_MS,
  MAX_STAGING_POOL_BYTES,
  type StagingPool,
  type StagingPoolOptions,
  type StagingPoolStats,
  type StagingSlot,
} from './create-staging-pool.js';
export { CONFIRM_BLOB_ABOVE_BYTES, DEFAULT_SYNC_READ_MAX_BYTES, MAX_TENSOR_BUFFER_BYTES } from './serve-tensor.js';
export { createFileReader, MAX_READ_CHUNK_BYTES, DEFAULT_MAX_IDLE_HANDLES, type ByteReader, type ByteReadOptions } from './create-file-reader.js';
export { ReadError, isReadError, type ReadErrorCode } from './read-error.js';
export {
  createPacedReader,
  DEFAULT_PACING_BURST_BYTES,
  DEFAULT_PACING_CHUNK_BYTES,
  type PacedReader,
  type PacedReaderOptions,
} from './create-paced-reader.js';
export { createReadWindow, DEFAULT_READ_WINDOW_BYTES, type ReadWindow } from './create-read-window.js';
export { runOrderedPipeline, type OrderedPipelineOptions } from './run-ordered-pipeline.js';
export { EVENT_LOOP_TURN_BUDGET_MS } from './take-turn-if-due.js';
export {
  createCpuDecoder,
  DEFAULT_DECODE_SLICE_VALUES,
  type DecodeBackend,
  type DecodeCallOptions,
  type HashedContentKey,
  type ReadDecodeRequest,
  type ReadDecodeStaging,
  type ReadDecodeResult,
  type StagingLease,
  type OpenedPayloadFile,
  type PayloadEntryFields,
} from './create-cpu-decoder.js';
export { resolveDecodeBackend, type BackendOption } from './resolve-decode-backend.js';
export { createKernelsDecoder, createWorkerPoolDecoder } from './create-kernels-decoder.js';
export {
  createThreadDecoder,
  getSharedThreadDecoder,
  DEFAULT_INLINE_MAX_VALUES,
  DEFAULT_DECODE_THREADS,
  DEFAULT_SPLIT_MIN_VALUES,
  READ_JOBS_PER_WORKER,
  DEFAULT_STARTUP_INLINE_MAX_VALUES,
  DEFAULT_HASH_INLINE_MAX_BYTES,
  HASH_PIECE_BYTES,
  type ThreadDecoder,
  type ThreadDecoderOptions,
  type ThreadDecoderStats,
} from './create-thread-decoder.js';
export { loadTensorToDevice, type DeviceTensor, type LoadTensorToDeviceOptions } from './load-tensor-to-device.js';
export {
  openShardCache,
  wrapCacheStore,
  DEFAULT_COVERAGE_MIN,
  type ShardCache,
  type ObjectSourcePolicy,
  type ObjectStampStats,
  type OpenShardCacheOptions,
} from './open-shard-cache.js';
export { MAX_IDLE_POOLS, IDLE_POOL_RELEASE_MS, releaseIdleStagingPools } from './idle-staging-pools.js';
export { openModel, type OpenModelOptions } from './open-model.js';
export { type TensorRequest } from './resolve-tensor-request.js';
export { loadTensor, type LoadTensorOptions } from './load-tensor.js';
export {
  loadModel,
  DEFAULT_LOAD_CONCURRENCY,
  DEFAULT_MAX_STAGING_BYTES,
  MAX_LOAD_CONCURRENCY,
  type LoadModelOptions,
  type ModelLoad,
} from './load-model.js';
export {
  LOAD_REASONS,
  createEmptyTotals,
  addToTotals,
  type LoadReason,
  type LoadTotals,
  type LoadedTensor,
  type TensorReport,
  type TensorSource,
} from './types.js';
