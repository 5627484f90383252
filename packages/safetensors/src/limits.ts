/**
 * Largest accepted header (the JSON after the 8-byte prefix). The reference implementation uses the
 * same 100 MB; a real header is ~100 bytes per tensor, so this admits ~1 M tensors while refusing a
 * forged length that would make us allocate gigabytes.
 */
export const MAX_HEADER_BYTES = 100_000_000;

/** Largest accepted model.safetensors.index.json (~60 bytes per tensor: ~1.6 M tensors). */
export const MAX_INDEX_BYTES = 100_000_000;

/** Deepest accepted shape. Real tensors have rank <= 8; this bounds per-tensor work on hostile headers. */
export const MAX_TENSOR_RANK = 64;

/** Largest single positioned read or write: Node refuses one read or write of 2 GiB or more (ERR_OUT_OF_RANGE). */
export const MAX_READ_CHUNK_BYTES = 1 << 30;

/** Default bound of one iterateTensors() batch (two are in flight: the current one and the read-ahead). */
export const DEFAULT_ITERATE_BUFFER_BYTES = 16 << 20;

/** Header writers pad so that 8 + header length is a multiple of this (the data section is aligned). */
export const HEADER_ALIGNMENT_BYTES = 8;

/** Size of the little-endian u64 header-length prefix. */
export const HEADER_PREFIX_BYTES = 8;

/**
 * A read checks its shard's stamp (size and mtime of the open file, and its header once its ctime
 * moved: SHARD_CHANGED when they changed)
 * unless a read of that shard checked it less than this long before. The check is an fstat (~3 µs
 * on the 2-core VM, ~7-12 % of a page-cache load of a model of many small tensors when made after
 * every read), and a file's mtime itself moves only once per kernel clock tick (1-10 ms).
 */
export const STAMP_CHECK_INTERVAL_MS = 1;

/** A shard's stamp for an object of a ByteSource: `etag:` and the object's version (SafetensorsShard.stamp). */
export const OBJECT_STAMP_PREFIX = 'etag:';

/**
 * Longest object stamp kept (a cache records at most 256 characters a stamp); an S3 ETag is a
 * quoted MD5 with a part count, under 50. A longer one gives no stamp (the shard is trusted unchecked).
 */
export const MAX_OBJECT_STAMP_CHARS = 256;
