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
// The sibling packages' helpers (argument checks, messages, option names) are not here: they are
// `@splitzip/codec/internal` (src/internal.ts).
export { SplitZipError, isSplitZipError, type SplitZipErrorCode } from './errors.js';
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
export { readEscapeStreams, validatePayloadStructure, type EscapeStreams } from './validate-payload-structure.js';
export { getCodecBackend, setCodecBackend, type CodecBackendName } from './backend.js';
