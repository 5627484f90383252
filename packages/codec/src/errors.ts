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

/** The one error type this package throws; `code` says what failed, `details` gives the offsets and values. */
export class SplitZipError extends Error {
  readonly code: SplitZipErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: SplitZipErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(`${code}: ${message}`);
    this.name = 'SplitZipError';
    this.code = code;
    this.details = details;
  }
}

export function isSplitZipError(value: unknown): value is SplitZipError {
  return value instanceof SplitZipError;
}
