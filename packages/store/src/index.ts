export { openCacheStore, DEFAULT_COVERAGE_MIN } from './open-cache-store.js';
export type { CacheStore, JournalRecovery } from './cache-store.js';
export { isDroppableEntry } from './drop-unbound-entries.js';
export { recoverDamagedManifest, type ManifestRecovery, type ManifestRecoveryProgress, type RecoverDamagedManifestOptions } from './recover-damaged-manifest.js';
export { computeContentKey, dtypeToTorchText, formatContentKeyPrefix, formatPythonShape, isBf16Dtype } from './compute-content-key.js';
export { digestHex, updateHash } from './hash-bytes.js';
export { StoreError, isStoreError, errnoCode, type StoreErrorCode, type StoreErrorContext } from './errors.js';
export { checkS3Options } from './check-options.js';
export {
  MANIFEST_FORMAT,
  MANIFEST_FORMAT_ONE_BINDING,
  PAYLOAD_FORMAT_VERSION,
  READABLE_PAYLOAD_VERSIONS,
  JOURNAL_VERSION,
  JOURNAL_VERSION_ONE_BINDING,
  MAX_NEWER_JOURNAL_VERSION,
  MAX_MANIFEST_BYTES,
  MAX_JOURNAL_RECORD_BYTES,
  MAX_JOURNAL_BYTES,
  JOURNAL_RECORD_TARGET_BYTES,
  MAX_GENERATION,
  CLOSE_COMPACT_MANIFEST_DIVISOR,
  CLOSE_COMPACT_MIN_JOURNAL_BYTES,
  COMPACT_MIN_JOURNAL_BYTES,
  MAX_ENTRIES,
  MAX_SHAPE_RANK,
  MAX_QUALNAME_CHARS,
  MAX_SHARD_NAME_CHARS,
  MAX_SLICE_STAMP_CHARS,
  MAX_SLICE_STAMPS,
  MAX_OBJECT_STAMPS_AHEAD,
  MAX_SLICE_BINDINGS,
  MAX_HOST_STAMP_FILE_BYTES,
  MAX_SLICE_KEYS_PER_ENTRY,
  MAX_SLICE_OFFSET_BYTES,
  MAX_RAW_BYTES,
  MAX_BLOB_BYTES,
  DEFAULT_LOCK_TIMEOUT_MS,
  MAX_REFRESH_INTERVAL_MS,
  JOURNAL_READ_WINDOW_BYTES,
  MAX_IO_PIECE_BYTES,
  MAX_QUOTED_VALUE_CHARS,
  MAX_LOCK_BREAK_DEPTH,
  MAX_LOCK_FILE_BYTES,
  MAX_PID,
  UNPARSEABLE_LOCK_STALE_MS,
  TEMP_FILE_MAX_AGE_MS,
  KEPT_BLOB_FILES_DESCRIPTOR_SHARE,
  MIN_KEPT_BLOB_FILES,
  MAX_BUFFER_BYTES,
} from './limits.js';
// Whether a binding keeps a stamp once recorded (past MAX_SLICE_STAMPS one may rank last: not kept).
export { isSliceStampKept } from './is-slice-stamp-kept.js';
export { VERIFY_DECODE_BLOCK_BYTES } from './hash-decoded-blocks.js';
export { MAX_OPEN_BLOB_FILES, countOpenBlobFiles, keptBlobFilesLimit } from './open-blob-files.js';
export { BLOB_DAMAGE_CODES } from './check-repair-payload.js';
export type { TempFilesReport } from './remove-abandoned-temp-files.js';
// The tag a writer's temp file names carry (removeAbandonedTempFiles judges a pid only in its own).
export { pidSpaceTag } from './write-lock.js';
// The writer lock's holder as the store reads and judges it (host, boot, pid namespace, pid,
// process start), for tools that name one: `readWriteLockHolder(join(root, 'lock'))`.
export { readWriteLockHolder, type LockHolder } from './write-lock.js';
export type {
  CacheEntry,
  PayloadMetaJson,
  SliceBinding,
  SliceKeyTuple,
  TensorBytesRef,
  AddEntryInput,
  AddEntryResult,
  PayloadDigest,
  AliasSliceItem,
  AliasSlicesOptions,
  UnbindSliceItem,
  DropUnboundEntriesOptions,
  DropUnboundEntriesReport,
  DroppedEntry,
  OpenCacheStoreOptions,
  VerifyOptions,
  VerifyProgress,
  VerifyProblem,
  VerifyReport,
  GcOptions,
  GcReport,
  GcKeptYoung,
  StaleDropResolution,
  DropStopReason,
  DropStopped,
  S3StoreOptions,
  S3ClientLike,
  ReadBlobOptions,
  OpenedBlob,
  ReadThroughBlobStats,
} from './types.js';
export { MAX_S3_SHARD_NAME_BYTES, MAX_S3_PREFIX_BYTES, MAX_S3_STAMP_BYTES, S3_MAX_OBJECT_KEY_BYTES, isS3Url, looksLikeOtherUrl, parseS3Url, type S3Location } from './s3-layout.js';
export { MAX_ENTRY_OBJECT_BYTES, S3_LAYOUT_FORMAT, S3_LAYOUT_FORMAT_PER_FILE, DEFAULT_GC_MIN_AGE_MS, MIN_S3_GC_AGE_MS, S3_INLINE_PAYLOAD_MAX_BYTES, S3_MAX_INLINE_TOTAL_BYTES, type S3GcOptions, type S3DropUnboundEntriesOptions } from './s3-cache-store.js';
export { CLOCK_OFFSET_NOISE_MS, isTransientS3Error, MAX_SILENT_ATTEMPTS } from './s3-transport.js';
export { DROP_INTENT_STALE_MS } from './s3-drop-intents.js';
export {
  openS3ObjectSource,
  openS3Object,
  MAX_SOURCE_LISTED_OBJECTS,
  OBJECT_CONFIRM_DELAY_MS,
  type S3Object,
  type S3ObjectSource,
} from './open-s3-object-source.js';
export { MAX_READ_THROUGH_RANGE_BYTES, MAX_PENDING_RANGE_WRITE_BYTES, type ReadThroughRangeStats } from './read-through-ranges.js';
export { READ_THROUGH_SYNC_MAX_BYTES } from './read-through-cache.js';
export { isBindingStale } from './is-binding-stale.js';
export { classifyBinding, type BindingTrust } from './classify-binding.js';
export { OBJECT_STAMP_PREFIX, shardStampKind, type ShardStampKind } from './shard-stamp-kind.js';
