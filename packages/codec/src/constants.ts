// Format constants (FORMAT.md is the authority; these mirror it).

/** Payload format version this package writes. */
export const FORMAT_VERSION = 3;
/**
 * Versions this package reads (FORMAT.md "Checksum": 1 hashes the sm section as one XXH32 stream,
 * 2 as two stripe streams, 3 per segment of SEGMENT_VALUES values as 2 + 4 stripe streams).
 */
export const READABLE_FORMAT_VERSIONS: readonly number[] = Object.freeze([1, 2, 3]);
/** Values per checksum segment in format version 3 (a multiple of every chunk size and of 32). */
export const SEGMENT_VALUES = 2 ** 20;
/** Digests per segment in format version 3: codes0, codes1, sm0, sm1, sm2, sm3. */
export const SEGMENT_DIGESTS = 6;
/** Fixed header size; also the first section's offset. */
export const HEADER_BYTES = 256;
/** Every section starts on a multiple of this, so a GPU or DMA engine can use it in place. */
export const SECTION_ALIGN_BYTES = 256;
export const DEFAULT_CHUNK_SIZE = 1024;
export const MIN_CHUNK_SIZE = 64;
/** A chunk-local escape position must fit in 16 bits. */
export const MAX_CHUNK_SIZE = 65536;
/** element_count is a u64 on disk, but a JS typed array and the u32 escape index cap it at 2^32 - 1. */
export const MAX_ELEMENT_COUNT = 2 ** 32 - 1;
/** Codes are 4 bits. */
export const MAX_CODEBOOK_SIZE = 16;

/** ASCII "SZBF". */
export const PAYLOAD_MAGIC: readonly number[] = Object.freeze([0x53, 0x5a, 0x42, 0x46]);

// Header field offsets (bytes from the start of the payload).
export const HEADER_OFFSET = Object.freeze({
  magic: 0,
  version: 4,
  headerBytes: 6,
  flags: 8,
  chunkSize: 12,
  elementCount: 16,
  escapeCount: 24,
  chunkCount: 32,
  codebookSize: 36,
  reserved1: 37,
  codebook: 40,
  sections: 56,
  totalBytes: 136,
  reserved2: 144,
  checksum: 252,
});
