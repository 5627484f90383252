// The one error type of @splitzip/bench-utils: a string `code` and the context it concerns.
export class BenchSummaryError extends Error {
  /**
   * @param {'REPO_ROOT_NOT_FOUND' | 'INVALID_PACKAGE_NAME' | 'INVALID_SUMMARY' | 'IO_ERROR'} code
   * @param {string} message
   * @param {Record<string, unknown>} [details]
   * @param {unknown} [cause]
   */
  constructor(code, message, details = {}, cause = undefined) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'BenchSummaryError';
    this.code = code;
    this.details = details;
  }
}

export function isBenchSummaryError(error) {
  return error instanceof BenchSummaryError;
}
