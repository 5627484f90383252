/** What went wrong in this package; payload-format errors stay the codec's `SplitZipError`. */
export type KernelsErrorCode =
  | 'INVALID_ARGUMENT'
  | 'BACKEND_UNAVAILABLE'
  | 'SELF_CHECK_FAILED'
  | 'KERNEL_FAILED'
  | 'DISPOSED'
  | 'WORKER_FAILED'
  | 'ABORTED';

// Every copy of this package in a process (its ESM and CommonJS builds, two installs) defines
// its own KernelsError: instances carry this registry symbol so that instanceof holds across copies.
const BRAND: unique symbol = Symbol.for('@splitzip/kernels/KernelsError') as never;

/** The one error type this package throws itself; `code` says what failed, `details` gives context. */
export class KernelsError extends Error {
  /**
   * True for a KernelsError from any copy of this package, not only this one. `this` is this class
   * itself when its prototype holds the brand as its own (a subclass's inherits it); not `this ===
   * KernelsError` (a class body naming its own class makes esbuild rename it unless keepNames, whose
   * `__name` calls bundlers cannot drop), nor the global `Error` as the parent (a polyfill may
   * replace it after this module loaded).
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Object.hasOwn(this.prototype, BRAND) ? (value as { [BRAND]?: unknown } | null | undefined)?.[BRAND] === true : super[Symbol.hasInstance](value);
  }

  readonly code: KernelsErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: KernelsErrorCode, message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(`${code}: ${message}`, options);
    this.name = 'KernelsError';
    this.code = code;
    this.details = details;
  }
}
Object.defineProperty(KernelsError.prototype, BRAND, { value: true });

/** A KernelsError from any copy of this package; with `code`, of that code (as the store's, runtime's and builder's guards). */
export function isKernelsError(value: unknown, code?: KernelsErrorCode): value is KernelsError {
  return value instanceof KernelsError && (code === undefined || value.code === code);
}
