export type SplitZipErrorCode =
  | 'TRUNCATED'
  | 'BAD_MAGIC'
  | 'UNSUPPORTED_VERSION'
  | 'BAD_HEADER'
  | 'INVALID_CODEBOOK'
  | 'BAD_SECTION'
  | 'CHECKSUM_MISMATCH'
  | 'BAD_ESCAPE_INDEX'
  | 'BAD_ESCAPE_POSITION'
  | 'INVALID_CODE'
  | 'OUTPUT_TOO_SMALL'
  | 'INVALID_ARGUMENT';

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own SplitZipError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/codec/SplitZipError') as never;

/** The one error type this package throws; `code` says what failed, `details` gives the offsets and values. */
export class SplitZipError extends Error {
  /**
   * True for a SplitZipError from any copy of this package, not only this one. `this` is this class
   * itself when its prototype holds the brand as its own (a subclass's inherits it). Not `this ===
   * SplitZipError`: a class body naming its own class makes esbuild rename it (`_SplitZipError`,
   * which console.log printed) unless keepNames, whose `__name` calls bundlers cannot drop. Nor
   * the global `Error` as the parent: a polyfill may replace it after this module loaded.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Object.hasOwn(this.prototype, BRAND) ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: SplitZipErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: SplitZipErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(`${code}: ${message}`);
    this.name = 'SplitZipError';
    this.code = code;
    this.details = details;
  }
}
Object.defineProperty(SplitZipError.prototype, BRAND, { value: true });

/** A SplitZipError from any copy of this package; with `code`, of that code (as the store's, runtime's and builder's guards). */
export function isSplitZipError(value: unknown, code?: SplitZipErrorCode): value is SplitZipError {
  return value instanceof SplitZipError && (code === undefined || value.code === code);
}
