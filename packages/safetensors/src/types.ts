import type { SafetensorsDtype } from './dtypes.js';

/**
 * THE slice identity of a tensor, used verbatim as the cache's slice key (README "Slice identity"):
 * shard file name, absolute offset of the tensor's data in that file (8 + header length + begin),
 * and its size (end - begin).
 */
export interface SliceKey {
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
}

/** One entry of a validated header, in file (offset) order. */
export interface ParsedTensorEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** As stored: [begin, end) relative to the data section. */
  dataOffsets: [number, number];
}

/** A validated header. */
export interface ParsedHeader {
  /** N: the header length as stored in the 8-byte prefix (padding included). */
  headerBytes: number;
  /** 8 + N: absolute offset of the data section. */
  dataStartBytes: number;
  /** file size - 8 - N. */
  dataBytes: number;
  /** `__metadata__` (string -> string), or null when absent. */
  metadata: Record<string, string> | null;
  /** Sorted by data offsets (= file order). */
  tensors: ParsedTensorEntry[];
}

/** A tensor of an opened model. */
export interface TensorInfo extends ParsedTensorEntry {
  slice: SliceKey;
  /** Absolute path of the shard file. */
  shardPath: string;
}

export interface SafetensorsShard {
  /** shardName of its tensors' slices. */
  name: string;
  /** Absolute path. */
  path: string;
  fileBytes: number;
  /** N, the header length (padding included). */
  headerBytes: number;
  metadata: Record<string, string> | null;
  /**
   * What the file was when it was opened, as a string that changes whenever its bytes are
   * rewritten: `<size>:<mtime ns>:<ctime ns>:<inode>` for a local file (formatFileStamp); for a model read
   * from a ByteSource, `etag:<etag>` of an object whose source gives its version (an S3 ETag,
   * OBJECT_STAMP_PREFIX), else null. A cache records it with each slice binding, so that a reader
   * of a changed (or another model's) file or object does not trust them unchecked.
   */
  stamp: string | null;
}

export interface SafetensorsModel {
  /** Directory holding the shards (absolute). */
  readonly rootDir: string;
  /** Absolute path of the index file, or null for a single file or a directory without index. */
  readonly indexPath: string | null;
  /** The index file's `metadata` object as stored (or null). */
  readonly indexMetadata: Record<string, unknown> | null;
  readonly shards: readonly SafetensorsShard[];
  /** Shard order, then file (offset) order. */
  readonly tensors: readonly TensorInfo[];
  getTensor(name: string): TensorInfo | undefined;
  /** The tensor with exactly this slice key (zero-byte tensors at one offset share a key: the first wins). */
  findBySlice(slice: SliceKey): TensorInfo | undefined;
  /**
   * True once close() was called (set before its files are closed). Every model
   * openSafetensorsModel returns has it; optional so that a caller's own wrapper type still fits
   * (absent: the model cannot say, and only its reads fail MODEL_CLOSED).
   */
  readonly closed?: boolean;
  /** Closes the shard files; later reads throw MODEL_CLOSED. Idempotent. */
  close(): Promise<void>;
}

/** A tensor to write: data must be exactly element count x dtype bits / 8 bytes. */
export interface TensorToWrite {
  name: string;
  dtype: SafetensorsDtype;
  shape: readonly number[];
  data: Uint8Array;
}

/** A tensor whose bytes a streaming writer will receive later, in order. */
export interface TensorSpec {
  name: string;
  dtype: SafetensorsDtype;
  shape: readonly number[];
}
