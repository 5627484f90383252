/** What went wrong in this package; payload-format errors stay the codec's `SplitZipError`. */
export type KernelsErrorCode =
  | 'INVALID_ARGUMENT'
  | 'BACKEND_UNAVAILABLE'
  | 'SELF_CHECK_FAILED'
  | 'KERNEL_FAILED'
  | 'DISPOSED'
  | 'WORKER_FAILED';

/** The one error type this package throws itself; `code` says what failed, `details` gives context. */
export class KernelsError extends Error {
  readonly code: KernelsErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: KernelsErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(`${code}: ${message}`);
    this.name = 'KernelsError';
    this.code = code;
    this.details = details;
  }
}

export function isKernelsError(value: unknown): value is KernelsError {
  return value instanceof KernelsError;
}
