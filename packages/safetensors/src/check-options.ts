import { SafetensorsError } from './errors.js';
import { findClosestName } from './find-closest-name.js';
import { quoteValue } from './quote-value.js';

/**
 * Every options argument of this package: an object (or undefined, handled by the caller's default)
 * with no own key outside `known`. A misspelt key (`maxBuferBytes`) was silently ignored and its
 * default used; now INVALID_ARGUMENT naming it, with the known name it most likely meant, as the
 * codec and kernels refuse theirs. `call` and `file` go in the message and context.
 */
export function checkOptions(options: unknown, known: readonly string[], call: string, file?: string): asserts options is object {
  const context = file !== undefined ? { file } : {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SafetensorsError('INVALID_ARGUMENT', `${call}: options must be an object { ${known.join(', ')} } or undefined, got ${quoteValue(options)}`, context);
  }
  for (const key in options) {
    if (!Object.prototype.hasOwnProperty.call(options, key) || known.includes(key)) continue;
    const near = findClosestName(key, known);
    const hint = near === undefined ? '' : `: did you mean ${quoteValue(near)}?`;
    throw new SafetensorsError('INVALID_ARGUMENT', `${call}: unknown option ${quoteValue(key)}${hint} (known: ${known.join(', ')})`, { ...context, key });
  }
}

/**
 * The option names of an options type, written out once: `Record<keyof T, true>` makes the
 * compiler refuse a name the type lacks and require every name it has, so the list cannot drift.
 */
export function optionNamesOf<T extends object>(names: Record<keyof T, true>): readonly (keyof T & string)[] {
  return Object.freeze(Object.keys(names)) as readonly (keyof T & string)[];
}
