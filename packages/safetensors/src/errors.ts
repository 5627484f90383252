import { quoteValue } from './quote-value.js';

/** Every way a safetensors file, index or request can be rejected; see README "Validation order". */
export type SafetensorsErrorCode =
  // header prefix and bytes (rules 1-7)
  | 'HEADER_LENGTH_MISSING'
  | 'HEADER_TOO_LARGE'
  | 'HEADER_OUT_OF_BOUNDS'
  | 'HEADER_INVALID_UTF8'
  | 'HEADER_INVALID_JSON'
  | 'HEADER_NOT_OBJECT'
  | 'HEADER_DUPLICATE_KEY'
  // entries (rules 8-14)
  | 'METADATA_INVALID'
  | 'TENSOR_ENTRY_INVALID'
  | 'TENSOR_UNKNOWN_DTYPE'
  | 'TENSOR_INVALID_SHAPE'
  | 'TENSOR_INVALID_OFFSETS'
  | 'TENSOR_BITS_NOT_BYTE_ALIGNED'
  | 'TENSOR_SPAN_MISMATCH'
  // data section (rules 15-16)
  | 'DATA_HOLE'
  | 'DATA_OVERLAP'
  | 'DATA_TRAILING_BYTES'
  | 'DATA_OUT_OF_BOUNDS'
  // index file (rules 17-23)
  | 'INDEX_TOO_LARGE'
  | 'INDEX_INVALID_UTF8'
  | 'INDEX_INVALID_JSON'
  | 'INDEX_NOT_OBJECT'
  | 'INDEX_DUPLICATE_KEY'
  | 'INDEX_INVALID'
  | 'INDEX_SHARD_INVALID_NAME'
  | 'INDEX_SHARD_ABSOLUTE'
  | 'INDEX_SHARD_TRAVERSAL'
  | 'INDEX_SHARD_OUTSIDE'
  | 'INDEX_SHARD_MISSING'
  | 'INDEX_TENSOR_MISSING'
  | 'INDEX_TENSOR_UNLISTED'
  /** A directory without index holds an incomplete or mixed set of numbered shards (rule 20b). */
  | 'SHARD_SET_INCOMPLETE'
  // model level
  | 'DUPLICATE_TENSOR_NAME'
  | 'PATH_NOT_FOUND'
  | 'NOT_SAFETENSORS'
  | 'IO_ERROR'
  // reading
  | 'UNKNOWN_TENSOR'
  | 'TARGET_TOO_SMALL'
  /** The tensor has more bytes than one buffer can hold (MAX_BUFFER_BYTES): it cannot be returned whole. */
  | 'TENSOR_TOO_LARGE'
  | 'UNEXPECTED_EOF'
  | 'MODEL_CLOSED'
  /**
   * A shard file's size or modification time changed since the model was opened (its header may no
   * longer describe it), or only its ctime moved and its header reads otherwise (the mtime put back).
   */
  | 'SHARD_CHANGED'
  | 'INVALID_ARGUMENT'
  // writing
  | 'WRITE_INVALID_TENSOR'
  | 'WRITE_SIZE_MISMATCH'
  /**
   * A sharded writer's directory holds a model file this write would not replace (a single
   * `model.safetensors`, shards of another prefix, an index of another name): a reader would open a mix.
   */
  | 'WRITE_OTHER_MODEL_FILE'
  /**
   * A sharded writer's commit failed after it had removed part of the old model and could not roll
   * forward: the directory holds no complete model; `staged` lists the new shards' temp files (the
   * only copy of them) and their final names.
   */
  | 'WRITE_INCOMPLETE'
  | 'WRITER_CLOSED'
  /**
   * A sharded writer's directory holds a commit record (`.<index name>.commit`): a write was
   * interrupted during its commit (or is committing now); resumeShardedModelWrite() finishes it.
   */
  | 'WRITE_COMMIT_PENDING'
  // resuming an interrupted commit (resumeShardedModelWrite)
  /** The directory holds no commit record: nothing to resume. */
  | 'COMMIT_RECORD_MISSING'
  /** The commit record is damaged (too large, not JSON, a field out of its rules, named in `key`): nothing was changed. */
  | 'COMMIT_RECORD_INVALID'
  /**
   * The record's writer still runs on this host (its pid is alive), or the commit lock is held
   * (another resume, a writer committing; a taker that cannot be seen): nothing was changed.
   */
  | 'COMMIT_IN_PROGRESS'
  /**
   * A staged shard is neither under its temp name with its recorded size nor in place with it (the
   * temp renamed: its recorded inode number, or in a copy of the directory the order of the renames):
   * nothing was changed. The message removes temps only where the old model is whole.
   */
  | 'COMMIT_SHARD_MISSING';

/** Byte positions involved in a failure. Header-relative unless the name says otherwise. */
export interface SafetensorsErrorOffsets {
  /** data_offsets[0] of the tensor concerned (relative to the data section). */
  begin?: number;
  /** data_offsets[1] of the tensor concerned. */
  end?: number;
  /** What the rule expected at this point (a size, an offset). */
  expected?: number;
  /** What was found instead (capped at Number.MAX_SAFE_INTEGER: `actualDecimal` holds a larger value exactly). */
  actual?: number;
  /**
   * `actual` exactly, as a decimal string, where it is a 64-bit value from a file: set by
   * HEADER_TOO_LARGE (the length prefix, up to 2^64 - 1, which a number cannot hold). A string, not a
   * bigint, so that the error still goes through JSON.stringify.
   */
  actualDecimal?: string;
  /** Absolute byte position in the file (or UTF-16 position in the header text for JSON errors). */
  position?: number;
}

export interface SafetensorsErrorContext {
  file?: string;
  tensor?: string;
  /** The second tensor a rule is about (`DATA_OVERLAP`: the one `tensor` overlaps). */
  otherTensor?: string;
  /** The JSON key a rule is about where it is no tensor name (`HEADER_DUPLICATE_KEY`, `INDEX_DUPLICATE_KEY`: the repeated key; `INVALID_ARGUMENT`: an unknown option). */
  key?: string;
  /** The shard file name (as the index or directory names it) a rule is about: INDEX_SHARD_MISSING, INDEX_SHARD_OUTSIDE. */
  shard?: string;
  offsets?: SafetensorsErrorOffsets;
  /** `WRITE_INCOMPLETE`: each new shard not yet in place, its temp file and its final path. */
  staged?: readonly StagedShardFile[];
  cause?: unknown;
}

/** A sharded writer's staged shard: its hidden temp file and the path it was to be renamed to. */
export interface StagedShardFile {
  temporaryPath: string;
  path: string;
}

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own SafetensorsError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/safetensors/SafetensorsError') as never;

/** The one error type this package throws for bad input, bad requests and I/O surprises. */
export class SafetensorsError extends Error {
  /** True for a SafetensorsError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === SafetensorsError ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: SafetensorsErrorCode;
  readonly file?: string;
  readonly tensor?: string;
  /** The second tensor a rule is about (`DATA_OVERLAP`: the one `tensor` overlaps). */
  readonly otherTensor?: string;
  /** The JSON key a rule is about (`HEADER_DUPLICATE_KEY`, `INDEX_DUPLICATE_KEY`: the repeated key; `INVALID_ARGUMENT`: an unknown option). */
  readonly key?: string;
  /** The shard file name (as the index or directory names it) a rule is about: INDEX_SHARD_MISSING, INDEX_SHARD_OUTSIDE. */
  readonly shard?: string;
  readonly offsets?: SafetensorsErrorOffsets;
  /** `WRITE_INCOMPLETE`: each new shard not yet in place, its temp file and its final path. */
  readonly staged?: readonly StagedShardFile[];

  constructor(code: SafetensorsErrorCode, message: string, context: SafetensorsErrorContext = {}) {
    const where = [
      context.file !== undefined ? context.file : undefined,
      context.tensor !== undefined ? `tensor ${quoteValue(context.tensor)}` : undefined,
    ]
      .filter((part) => part !== undefined)
      .join(', ');
    super(`${code}: ${where ? `${where}: ` : ''}${message}`, context.cause !== undefined ? { cause: context.cause } : undefined);
    this.name = 'SafetensorsError';
    this.code = code;
    if (context.file !== undefined) this.file = context.file;
    if (context.tensor !== undefined) this.tensor = context.tensor;
    if (context.otherTensor !== undefined) this.otherTensor = context.otherTensor;
    if (context.key !== undefined) this.key = context.key;
    if (context.shard !== undefined) this.shard = context.shard;
    if (context.offsets !== undefined) this.offsets = context.offsets;
    if (context.staged !== undefined) this.staged = context.staged;
  }
}
Object.defineProperty(SafetensorsError.prototype, BRAND, { value: true });

/** A SafetensorsError from any copy of this package; with `code`, of that code (as the store's, runtime's and builder's guards). */
export function isSafetensorsError(value: unknown, code?: SafetensorsErrorCode): value is SafetensorsError {
  return value instanceof SafetensorsError && (code === undefined || value.code === code);
}
