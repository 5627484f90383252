import { describeValue } from '@splitzip/codec/internal';
/**
 * Typed errors of the runtime. Every error has a string `code` and a `details` object naming the
 * thing it is about (tensor name, shard file, slice, cache key, sizes), so a caller can branch on
 * `code` and a log line says what went wrong without a stack trace.
 */
export type RuntimeErrorCode =
  /** A bad option or argument (negative size, slot count 0, unknown backend name…). */
  | 'INVALID_ARGUMENT'
  /** The cache directory has no manifest, or the store refused to open it. */
  | 'CACHE_OPEN_FAILED'
  /** A load, lookup, alias, refresh or pool was asked of a cache handle after its close(). */
  | 'CACHE_CLOSED'
  /** A slice names a shard the model does not have (or no model was given to find it). */
  | 'SHARD_NOT_FOUND'
  /** A model location (path or s3:// URL) could not be opened as a safetensors model. */
  | 'MODEL_OPEN_FAILED'
  /** A tensor was asked of a model handle after its close() (open the model again). */
  | 'MODEL_CLOSED'
  /** A shard file could not be opened or read (deleted, truncated, permission). */
  | 'SHARD_READ_FAILED'
  /**
   * A shard file was rewritten in place (its size or modification time changed, or its header, the
   * modification time put back) since the model was opened: neither its cached nor its raw bytes are served through that handle; open the model again.
   */
  | 'SHARD_CHANGED'
  /** A slice `(shardName, offsetBytes, sizeBytes)` matches no tensor of the model and no cache entry. */
  | 'SLICE_NOT_FOUND'
  /**
   * A bare slice request (no model) of a slice bound to several entries, one per file (a local
   * cache holding revisions of one model side by side): no stamp picks one; pass the model.
   */
  | 'SLICE_AMBIGUOUS'
  /** A tensor name the model does not have. */
  | 'TENSOR_NOT_FOUND'
  /** `cacheOnly` was asked and the tensor has no cache entry (non-BF16, gate-failed, not built). */
  | 'NOT_CACHED'
  /** The blob could not be read, is truncated, or its checksum fails. */
  | 'CACHE_READ_FAILED'
  /**
   * The cache's object store stayed unreachable through the store's retries, or (openShardCache) a
   * directory cache is being created by a live writer (retryable: the same call may succeed later).
   */
  | 'CACHE_UNAVAILABLE'
  /** The manifest entry disagrees with its blob or with the tensor it is served for. */
  | 'CACHE_ENTRY_MISMATCH'
  /** The decode backend threw or produced the wrong number of values. */
  | 'DECODE_FAILED'
  /** The decoded bytes do not hash to their entry's content key (the digest of the original bytes). */
  | 'DIGEST_MISMATCH'
  /** A tensor larger than one buffer can be (Node 20: 4 GiB): the runtime cannot allocate it, nor can a caller. */
  | 'TENSOR_TOO_LARGE'
  /** A caller-provided output buffer is smaller than the tensor. */
  | 'OUTPUT_TOO_SMALL'
  /** A payload is larger than the staging slot it must be read into. */
  | 'SLOT_TOO_SMALL'
  /** A staging slot was released twice, released to a pool that does not own it, or read into while not acquired. */
  | 'SLOT_NOT_OWNED'
  /** A blob read was asked into a staging slot that another blob read is still filling. */
  | 'SLOT_BUSY'
  /** The pool was closed while a caller waited for a slot, or used after close. */
  | 'POOL_CLOSED'
  /**
   * An acquire waited its `slotWaitMs` and no slot came. Retryable (`retryable`) while some slot was
   * merely busy; not once every slot is set aside (`quarantinedSlots` = `slotCount`) for a read or
   * decode an aborted load left behind, which may never settle.
   */
  | 'POOL_WAIT_TIMEOUT'
  /** The caller's AbortSignal fired. */
  | 'ABORTED'
  /** The GPU consumer path was asked for and no device decoder is available. */
  | 'DEVICE_UNAVAILABLE';

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own RuntimeError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/runtime/RuntimeError') as never;

export class RuntimeError extends Error {
  /** True for a RuntimeError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === RuntimeError ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: RuntimeErrorCode;
  readonly details: Readonly<Record<string, unknown>>;
  /** True when the same call may succeed later (an object store that was down): `details.retryable`. */
  readonly retryable: boolean;

  constructor(code: RuntimeErrorCode, message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RuntimeError';
    this.code = code;
    this.details = Object.freeze({ ...details });
    this.retryable = details.retryable === true;
  }
}
Object.defineProperty(RuntimeError.prototype, BRAND, { value: true });

/** The failures that make a tensor fall back to the raw shard (or throw with `cacheOnly`). */
export const CACHE_FAILURE_CODES: ReadonlySet<RuntimeErrorCode> = new Set<RuntimeErrorCode>([
  'CACHE_READ_FAILED',
  'CACHE_UNAVAILABLE',
  'CACHE_ENTRY_MISMATCH',
  'DECODE_FAILED',
  'DIGEST_MISMATCH',
  'SLOT_TOO_SMALL',
]);

/**
 * `error` with `details.tensor` = `tensor` and the message led by the tensor's name: cache errors
 * are raised where only the entry is known (its qualname is the first tensor built with those
 * bytes, which may be another name), and a caller of `cacheOnly` needs the tensor it asked for.
 */
export function nameTensorInError(error: RuntimeError, tensor: string): RuntimeError {
  if (error.details.tensor === tensor && error.message.startsWith(`${tensor}: `)) return error;
  const message = error.message.startsWith(`${tensor}: `) ? error.message : `${tensor}: ${error.message}`;
  return new RuntimeError(error.code, message, { ...error.details, tensor }, { cause: error.cause ?? error });
}

/**
 * ABORTED for a load (or a wait of one) whose signal fired: the signal's reason is the error's
 * standard `cause` (where a caller's `error.cause` finds it) and stays in `details.reason`.
 */
export function abortedError(message: string, signal: AbortSignal | undefined, details: Record<string, unknown> = {}): RuntimeError {
  const reason: unknown = signal?.reason;
  // The reason in the message too (bounded): a loader that logs `code: message` saw only "load
  // aborted", not whose abort it was (its shutdown, a timeout signal's TimeoutError).
  const why = reason === undefined ? '' : ` (the signal's reason: ${describeAbortReason(reason)})`;
  return new RuntimeError('ABORTED', `${message}${why}`, { ...details, reason }, reason === undefined ? undefined : { cause: reason });
}

/** An abort reason for a message: an Error (or DOMException) by its name and message, cut as describeValue cuts; anything else as describeValue shows it. */
function describeAbortReason(reason: unknown): string {
  try {
    const { name, message } = (typeof reason === 'object' && reason !== null ? reason : {}) as { name?: unknown; message?: unknown };
    const named = typeof name === 'string' && name !== '' ? name : undefined;
    // `new Error()`'s empty message: its name alone ("Error", not "Error: "); neither: by describeValue.
    if (typeof message === 'string' && (message !== '' || named !== undefined)) {
      const text = named === undefined ? message : message === '' ? named : `${named}: ${message}`;
      return describeValue(text).slice('string "'.length, -1);
    }
  } catch {
    // A Proxy whose get trap throws: shown by describeValue.
  }
  return describeValue(reason);
}

export function isRuntimeError(error: unknown, code?: RuntimeErrorCode): error is RuntimeError {
  return error instanceof RuntimeError && (code === undefined || error.code === code);
}

/** Whether a thrown value (a store, safetensors or runtime error, or its cause) says "retry later". */
export function isRetryableError(error: unknown): boolean {
  let e = error as { retryable?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (e.retryable === true) return true;
    e = e.cause as typeof e;
  }
  return false;
}

/** A short, stable description of any thrown value, for reports. */
export function describeError(error: unknown): { code: string; message: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { code: typeof code === 'string' ? code : error.name, message: error.message };
  }
  return { code: 'UNKNOWN', message: String(error) };
}
