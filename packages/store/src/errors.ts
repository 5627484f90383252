import { constants as osConstants } from 'node:os';
export type StoreErrorCode =
  | 'NOT_A_CACHE'
  | 'UNSUPPORTED_FORMAT'
  | 'MANIFEST_INVALID'
  | 'JOURNAL_INVALID'
  | 'ENTRY_INVALID'
  | 'SIZE_INVALID'
  | 'INVALID_CODEBOOK'
  | 'UNSUPPORTED_PAYLOAD_VERSION'
  | 'UNSAFE_BLOB_PATH'
  | 'SLICE_CONFLICT'
  | 'SLICE_SIZE_MISMATCH'
  | 'ENTRY_NOT_FOUND'
  | 'SLOT_TOO_SMALL'
  | 'BLOB_MISSING'
  | 'BLOB_SIZE_MISMATCH'
  | 'BLOB_CORRUPT'
  | 'META_MISMATCH'
  | 'DIGEST_MISMATCH'
  | 'UNKNOWN_DTYPE'
  | 'INVALID_ARGUMENT'
  | 'LOCK_TIMEOUT'
  | 'STORE_CLOSED'
  | 'IO_ERROR'
  /**
   * A write met a full disk or quota (ENOSPC, EDQUOT; `details.errno` says which): not damage, and
   * nothing stored is lost (every write goes to a temp file first, removed on failure). Space freed,
   * the same call may succeed.
   */
  | 'NO_SPACE'
  /**
   * A write to a local cache was refused (EROFS: a read-only mount, even as root; EACCES/EPERM: the
   * directory's permissions): `details.errno`, `details.syscall`, `details.path`. A writer (gc, a
   * drop, a build's commit) needs write access to the cache directory; readers do not.
   */
  | 'NOT_WRITABLE'
  | 'S3_UNAVAILABLE'
  | 'S3_ERROR'
  /** The S3 store's `signal` fired (S3StoreOptions.signal): a request or its retries were abandoned. */
  | 'ABORTED'
  /** openS3ObjectSource: the object does not exist. */
  | 'OBJECT_MISSING'
  /** openS3ObjectSource: the object's size is no longer what it was when opened (replaced), or a range runs past its end. */
  | 'OBJECT_CHANGED';

/** Codes a caller may retry later with the same arguments (the server or another process may recover). */
const RETRYABLE_CODES: ReadonlySet<StoreErrorCode> = new Set(['S3_UNAVAILABLE', 'LOCK_TIMEOUT']);

export interface StoreErrorContext {
  /** The tensor key of the entry concerned, where there is one. */
  entry?: string;
  /** The file concerned (absolute), where there is one. */
  path?: string;
  /** Offsets, sizes, limits and the other values that explain the failure. */
  details?: Record<string, unknown>;
  cause?: unknown;
}

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own StoreError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/store/StoreError') as never;

/** The one error type this package throws; `code` says what failed, `entry`/`path`/`details` where. */
export class StoreError extends Error {
  /** True for a StoreError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === StoreError ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: StoreErrorCode;
  readonly entry: string | undefined;
  readonly path: string | undefined;
  readonly details: Record<string, unknown>;
  /** The message without the code prefix and the (entry, file) suffix. */
  readonly reason: string;
  /** True when the same call may succeed later (object store down, writer lock busy). */
  readonly retryable: boolean;

  constructor(code: StoreErrorCode, message: string, context: StoreErrorContext = {}) {
    const where = [context.entry ? `entry ${context.entry}` : '', context.path ? `file ${context.path}` : '']
      .filter(Boolean)
      .join(', ');
    super(`${code}: ${message}${where ? ` (${where})` : ''}`, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = 'StoreError';
    this.code = code;
    this.entry = context.entry;
    this.path = context.path;
    this.details = context.details ?? {};
    this.reason = message;
    this.retryable = RETRYABLE_CODES.has(code);
  }

  /** The same error with `entry`/`path` filled in where they were missing. */
  withContext(context: { entry?: string; path?: string }): StoreError {
    if ((this.entry || !context.entry) && (this.path || !context.path)) return this;
    return new StoreError(this.code, this.reason, {
      entry: this.entry ?? context.entry,
      path: this.path ?? context.path,
      details: this.details,
      cause: this.cause,
    });
  }
}
Object.defineProperty(StoreError.prototype, BRAND, { value: true });

export function isStoreError(value: unknown, code?: StoreErrorCode): value is StoreError {
  return value instanceof StoreError && (code === undefined || value.code === code);
}

/** Node's errno code of a system error, if any. */
export function errnoCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  // libuv names no code for some errnos: Node 20 says "Unknown system error -122" for EDQUOT.
  const unnamed = /^Unknown system error -(\d+)$/.exec(code);
  return unnamed === null ? code : (ERRNO_NAMES.get(Number(unnamed[1])) ?? code);
}

/** errno number → name (EDQUOT, …), built once from this platform's constants. */
const ERRNO_NAMES: ReadonlyMap<number, string> = new Map(Object.entries(osConstants.errno).map(([name, value]) => [value, name]));

/** The errnos of a full disk (ENOSPC) or quota (EDQUOT): NO_SPACE, not IO_ERROR. */
const NO_SPACE_ERRNOS: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);

/**
 * Wraps an unexpected file-system failure (IO_ERROR; NO_SPACE for a full disk or quota, so a
 * caller can tell it from damage by code); StoreErrors pass through unchanged. The errno is in the
 * message, `details.errno` and `cause`.
 */
export function toIoError(error: unknown, message: string, context: StoreErrorContext = {}): StoreError {
  if (error instanceof StoreError) return error;
  const errno = errnoCode(error);
  if (errno !== undefined && NO_SPACE_ERRNOS.has(errno)) {
    const full = errno === 'EDQUOT' ? 'the disk quota is full' : 'the disk is full';
    return new StoreError('NO_SPACE', `${message}: ${full} [${errno}]`, { ...context, details: { ...context.details, errno }, cause: error });
  }
  return new StoreError('IO_ERROR', `${message}${errno ? ` [${errno}]` : ''}`, {
    ...context,
    details: { ...context.details, errno },
    cause: error,
  });
}

/**
 * The errnos of a write the file system refused: a read-only mount (EROFS) or permissions (EACCES,
 * EPERM). EPERM of link() is no refusal of the directory: it is a file system without hard links.
 */
const REFUSED_WRITE_ERRNOS: ReadonlySet<string> = new Set(['EROFS', 'EACCES', 'EPERM']);

function isRefusedWrite(error: unknown): boolean {
  const errno = errnoCode(error);
  if (errno === undefined || !REFUSED_WRITE_ERRNOS.has(errno)) return false;
  return !(errno === 'EPERM' && (error as { syscall?: unknown }).syscall === 'link');
}

/**
 * toIoError for a call that writes the cache (creates, renames or removes a file there): a write the
 * file system refused (EROFS, EACCES, EPERM) is NOT_WRITABLE, with the errno, the system call and
 * the path in `details`, as the CLI says it; anything else as toIoError has it. Only for writes: a
 * refused read (another user's manifest of mode 0600) stays IO_ERROR; StoreErrors pass through.
 */
export function toWriteError(error: unknown, message: string, context: StoreErrorContext = {}): StoreError {
  if (error instanceof StoreError) return error;
  if (!isRefusedWrite(error)) return toIoError(error, message, context);
  const errno = errnoCode(error)!;
  const syscall = (error as { syscall?: unknown }).syscall;
  const why = errno === 'EROFS' ? 'the file system is read-only' : 'permission denied';
  return new StoreError('NOT_WRITABLE', `${message}: ${why} [${errno}]`, {
    ...context,
    details: { ...context.details, errno, ...(typeof syscall === 'string' ? { syscall } : {}), ...(context.path === undefined ? {} : { path: context.path }) },
    cause: error,
  });
}

