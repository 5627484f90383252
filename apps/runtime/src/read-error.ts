/** Why `createFileReader().readExact` failed, when the file system did not say (its errors pass through as Node's, with their errno `code`). */
export type ReadErrorCode =
  /** The file ended before the bytes asked for: a truncated shard. */
  | 'UNEXPECTED_EOF'
  /** `readExact` after the reader's `close()`. */
  | 'READER_CLOSED'
  /** The read's `signal` fired: it stopped between its pieces (`cause`: the signal's reason). */
  | 'ABORTED';

// As RuntimeError's: instanceof holds across the package's ESM and CommonJS copies.
const BRAND: unique symbol = Symbol.for('@splitzip/runtime/ReadError') as never;

export class ReadError extends Error {
  /** True for a ReadError from any copy of this package, not only this one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return this === ReadError ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: ReadErrorCode;
  /** The file the read was of. */
  readonly path: string;

  constructor(code: ReadErrorCode, message: string, path: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadError';
    this.code = code;
    this.path = path;
  }
}
Object.defineProperty(ReadError.prototype, BRAND, { value: true });

/** Type guard: `error` is a ReadError (from any copy of this package), optionally with `code`. */
export function isReadError(error: unknown, code?: ReadErrorCode): error is ReadError {
  return error instanceof ReadError && (code === undefined || error.code === code);
}
