import { SplitZipError } from './errors.js';
import { findClosestName } from './find-closest-name.js';

/**
 * An options argument as given: undefined or null for none, else it must be an object whose own
 * keys are all in `known`. A number or string where options go (`encode(values, book, 4096)`) or
 * a misspelt key (`{ chunksize: 4096 }`, `{ verfy: false }`) is a caller's mistake that would
 * otherwise be ignored and give the defaults silently.
 */
export function readOptions<T extends object>(options: T | null | undefined, name: string, known: readonly (keyof T & string)[]): T | undefined {
  if (options === undefined || options === null) return undefined;
  if (typeof options !== 'object') {
    throw new SplitZipError('INVALID_ARGUMENT', `${name} must be an object (or undefined)`, { argument: name, type: typeof options });
  }
  // for-in over a small literal allocates nothing (Object.keys would, on every decode call).
  for (const key in options) {
    if (!Object.prototype.hasOwnProperty.call(options, key) || (known as readonly string[]).includes(key)) continue;
    const near = findClosestName(key, known);
    throw new SplitZipError(
      'INVALID_ARGUMENT',
      `${name}: unknown option ${JSON.stringify(key)}${near === undefined ? '' : `: did you mean ${JSON.stringify(near)}?`} (known: ${known.join(', ')})`,
      { argument: name, option: key, known: [...known] },
    );
  }
  return options;
}

/**
 * The option names of an options type, written out once: `Record<keyof T, true>` makes the
 * compiler refuse a name the type lacks and require every name it has, so the list cannot drift.
 */
export function optionNamesOf<T extends object>(names: Record<keyof T, true>): readonly (keyof T & string)[] {
  return Object.freeze(Object.keys(names)) as readonly (keyof T & string)[];
}
