import { SplitZipError } from './errors.js';

/**
 * An options argument as given: undefined or null for none, else it must be an object. A number
 * or string where options go (`encode(values, book, 4096)`) is a caller's mistake that would
 * otherwise be ignored and give the defaults silently.
 */
export function readOptions<T extends object>(options: T | null | undefined, name: string): T | undefined {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object') {
    throw new SplitZipError('INVALID_ARGUMENT', `${name} must be an object (or undefined)`, { argument: name, type: typeof options });
  }
  return options;
}
