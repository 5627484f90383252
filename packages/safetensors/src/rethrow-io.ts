import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';

/**
 * A SafetensorsError as is; anything else (a file-system error) as IO_ERROR naming `file` (the path
 * the caller asked for, not a temp file or descriptor) with the errno code.
 */
export function rethrowIo(cause: unknown, file: string): never {
  if (cause instanceof SafetensorsError) throw cause;
  const code = (cause as NodeJS.ErrnoException)?.code ?? 'unknown';
  throw new SafetensorsError('IO_ERROR', `file system error ${code}: ${cause instanceof Error ? cause.message : quoteValue(cause)}`, { file, cause });
}
