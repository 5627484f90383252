import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';

/**
 * A file-system error (one with a string errno `code`) as IO_ERROR naming `file` (the path the
 * caller asked for, not a temp file or descriptor) with the errno code; anything else (a
 * SafetensorsError, a programming error) unchanged: a TypeError was reported as IO_ERROR 'unknown'.
 */
export function rethrowIo(cause: unknown, file: string): never {
  const code: unknown = cause instanceof SafetensorsError ? undefined : (cause as NodeJS.ErrnoException | null | undefined)?.code;
  if (typeof code !== 'string') throw cause;
  throw new SafetensorsError('IO_ERROR', `file system error ${code}: ${cause instanceof Error ? cause.message : quoteValue(cause)}`, { file, cause });
}
