export {
  FORMAT_VERSION,
  READABLE_FORMAT_VERSIONS,
  HEADER_BYTES,
  SECTION_ALIGN_BYTES,
  DEFAULT_CHUNK_SIZE,
  MIN_CHUNK_SIZE,
  MAX_CHUNK_SIZE,
  MAX_ELEMENT_COUNT,
  MAX_CODEBOOK_SIZE,
  SEGMENT_VALUES,
  SEGMENT_DIGESTS,
} from './constants.js';
export { SplitZipError, isSplitZipError, type SplitZipErrorCode } from './errors.js';
// Argument checks the kernels package applies with the codec's own rules and messages.
export { checkNoOverlap } from './check-overlap.js';
export { argumentTypeError } from './argument-type-error.js';
export { describeValue } from './describe-value.js';
export { findClosestName, MAX_SUGGESTION_EDITS } from './find-closest-name.js';
export { formatCoverage } from './format-coverage.js';
export { findUnknownOption, optionNamesOf, type UnknownOption } from './find-unknown-option.js';
export { isDetachedBuffer } from './is-detached-buffer.js';
export { checkReadableView, isUint16Array, isUint8Array } from './typed-array-kind.js';
export { createCodebook, type Codebook } from './create-codebook.js';
export { codebookToJson, codebookFromJson, MAX_CODEBOOK_JSON_CHARS, type CodebookJson } from './codebook-json.js';
export { countExponents } from './count-exponents.js';
export { bf16FromFloat32 } from './bf16-from-float32.js';
export { float32FromBf16 } from './float32-from-bf16.js';
export { calibrateCodebook, calibrateFromHistogram, type CalibrationResult } from './calibrate-codebook.js';
export { computePayloadLayout, type PayloadLayout, type PayloadSection } from './compute-payload-layout.js';
export { readPayloadMeta, type PayloadMeta } from './read-payload-meta.js';
export { readPayloadHeader, type PayloadHeader } from './read-payload-header.js';
export { verifyPayloadChecksum } from './verify-payload-checksum.js';
export { convertPayloadVersion } from './convert-payload-version.js';
export { xxh32 } from './xxh32.js';
export { createXxh32Stream, type Xxh32Stream } from './create-xxh32-stream.js';
export { encode, type EncodeOptions } from './encode.js';
export { decode } from './decode.js';
export { decodeRange, type DecodeOptions } from './decode-range.js';
export { decodeChunks } from './decode-chunks.js';
export { countPayloadSegments } from './count-payload-segments.js';
export { computeSegmentSpans } from './payload-checksum.js';
export { computeSegmentDigests } from './compute-segment-digests.js';
export { decodeSegments, type DecodeSegmentsOptions } from './decode-segments.js';
export { combineSegmentDigests } from './combine-segment-digests.js';
export { verifySegmentDigests } from './verify-segment-digests.js';
export { computeOuterDigests, combineOuterDigests, verifyOuterDigests, OUTER_DIGESTS } from './outer-digests.js';
export { createPayloadWriter, type PayloadWriter } from './create-payload-writer.js';
export {
  createCodecArena,
  MAX_ARENA_BYTES,
  MAX_ARENA_THREADS,
  type CodecArena,
  type CodecArenaMemory,
  type CodecArenaOptions,
  type CodecArenaShare,
} from './create-codec-arena.js';
export { attachCodecArena, type AttachedCodecArena } from './attach-codec-arena.js';
export { mallocUsesHugePages } from './malloc-uses-huge-pages.js';
export { readEscapeStreams, validatePayloadStructure, type EscapeStreams } from './validate-payload-structure.js';
export { getCodecBackend, setCodecBackend, type CodecBackendName } from './backend.js';
