export { openCacheStore, DEFAULT_COVERAGE_MIN } from './open-cache-store.js';
export type { CacheStore } from './cache-store.js';
export { computeContentKey, dtypeToTorchText, formatPythonShape, isBf16Dtype } from './compute-content-key.js';
export { StoreError, isStoreError, type StoreErrorCode, type StoreErrorContext } from './errors.js';
export {
  MANIFEST_FORMAT,
  PAYLOAD_FORMAT_VERSION,
  JOURNAL_VERSION,
  MAX_MANIFEST_BYTES,
  MAX_JOURNAL_RECORD_BYTES,
  MAX_JOURNAL_BYTES,
  JOURNAL_RECORD_TARGET_BYTES,
  MAX_GENERATION,
  COMPACT_MIN_JOURNAL_BYTES,
  MAX_ENTRIES,
  MAX_SHAPE_RANK,
  MAX_QUALNAME_CHARS,
  MAX_SHARD_NAME_CHARS,
  MAX_SLICE_KEYS_PER_ENTRY,
  MAX_SLICE_OFFSET_BYTES,
  MAX_RAW_BYTES,
  MAX_BLOB_BYTES,
  DEFAULT_LOCK_TIMEOUT_MS,
} from './limits.js';
export type {
  CacheEntry,
  PayloadMetaJson,
  SliceKeyTuple,
  TensorBytesRef,
  AddEntryInput,
  AddEntryResult,
  AliasSliceItem,
  AliasSlicesOptions,
  OpenCacheStoreOptions,
  VerifyOptions,
  VerifyProgress,
  VerifyProblem,
  VerifyReport,
  GcOptions,
  GcReport,
} from './types.js';
