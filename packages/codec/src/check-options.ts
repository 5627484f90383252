import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import { findUnknownOption } from './find-unknown-option.js';

/** An unknown key's characters kept in details.option (the message shows 60). */
const MAX_KEY_DETAIL_CHARS = 200;

/**
 * An options argument as given: undefined or null for none, else it must be an object whose own
 * keys are all in `known`. A number or string where options go (`encode(values, book, 4096)`) or
 * a misspelt key (`{ chunksize: 4096 }`, `{ verfy: false }`) is a caller's mistake that would
 * otherwise be ignored and give the defaults silently.
 */
export function readOptions<T extends object>(options: T | null | undefined, name: string, known: readonly (keyof T & string)[]): T | undefined {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object') {
    throw new SplitZipError('INVALID_ARGUMENT', `${name} must be an object (or undefined), got ${describeValue(options)}`, {
      argument: name,
      type: typeof options,
      got: describeValue(options),
    });
  }
  const unknown = findUnknownOption(options, known);
  if (unknown !== undefined) {
    const { key, near } = unknown;
    throw new SplitZipError(
      'INVALID_ARGUMENT',
      // The key as describeValue shows a string (quoted, cut to 60 characters): a 1 MB key made a 1 MB message.
      `${name}: unknown option ${describeValue(key).slice('string '.length)}${near === undefined ? '' : `: did you mean ${JSON.stringify(near)}?`} (known: ${known.join(', ')})`,
      { argument: name, option: key.length > MAX_KEY_DETAIL_CHARS ? `${key.slice(0, MAX_KEY_DETAIL_CHARS)}...` : key, known: [...known] },
    );
  }
  return options;
}
