import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';

/**
 * A file-system error (one with an errno `code`, such as ENOENT) as IO_ERROR naming `file` (the path
 * the caller asked for, not a temp file or descriptor) with the errno code; Node's refusal of an
 * argument (`ERR_INVALID_ARG_VALUE`: a path with a NUL byte) as INVALID_ARGUMENT; anything else (a
 * SafetensorsError, a programming error, Node's other `ERR_*` codes) unchanged: a TypeError was
 * reported as IO_ERROR 'unknown', and a NUL in a path as a file system error.
 */
export function rethrowIo(cause: unknown, file: string): never {
  const code: unknown = cause instanceof SafetensorsError ? undefined : (cause as NodeJS.ErrnoException | null | undefined)?.code;
  if (typeof code !== 'string') throw cause;
  const message = cause instanceof Error ? cause.message : quoteValue(cause);
  if (code.startsWith('ERR_INVALID_ARG')) throw new SafetensorsError('INVALID_ARGUMENT', `${message} (${code})`, { file, cause });
  if (code.startsWith('ERR_')) throw cause;
  throw new SafetensorsError('IO_ERROR', `file system error ${code}: ${message}`, { file, cause });
}
