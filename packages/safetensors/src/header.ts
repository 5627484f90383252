// Pure entry (no Node imports): header parsing and serialization, usable in browsers.
export { computeTensorByteSize, type TensorByteSize } from './compute-tensor-byte-size.js';
export { DTYPE_BITS, SAFETENSORS_DTYPES, isSafetensorsDtype, type SafetensorsDtype } from './dtypes.js';
export { SafetensorsError, isSafetensorsError, type SafetensorsErrorCode, type SafetensorsErrorOffsets, type StagedShardFile } from './errors.js';
export { findDuplicateJsonKey, scanJsonValue, type DuplicateJsonKey, type JsonValueScan } from './find-duplicate-json-key.js';
export {
  DEFAULT_ITERATE_BUFFER_BYTES,
  HEADER_ALIGNMENT_BYTES,
  HEADER_PREFIX_BYTES,
  MAX_HEADER_BYTES,
  MAX_INDEX_BYTES,
  MAX_OBJECT_STAMP_CHARS,
  MAX_READ_CHUNK_BYTES,
  MAX_TENSOR_RANK,
  OBJECT_STAMP_PREFIX,
  STAMP_CHECK_INTERVAL_MS,
} from './limits.js';
export { MAX_QUOTED_CHARS } from './quote-value.js';
export { parseHeaderLengthPrefix, parseSafetensorsBytes, parseSafetensorsHeader, type HeaderContext } from './parse-safetensors-header.js';
export { parseSafetensorsIndex, type ParsedIndex } from './parse-safetensors-index.js';
export { serializeSafetensorsHeader, type SerializedHeader } from './serialize-safetensors-header.js';
export type { ParsedHeader, ParsedTensorEntry, SliceKey, TensorInfo, TensorSpec, TensorToWrite, SafetensorsModel, SafetensorsShard } from './types.js';
