import { findClosestName } from './find-closest-name.js';

/** An own key of an options object that its function does not take, and the known name it most likely meant. */
export interface UnknownOption {
  key: string;
  near: string | undefined;
}

/**
 * The first own key of `options` outside `known`, with findClosestName's suggestion, or undefined.
 * The one rule of every @splitzip package that refuses misspelt options (each throws its own error);
 * for-in over a small literal allocates nothing, where Object.keys would on every decode call.
 */
export function findUnknownOption(options: object, known: readonly string[]): UnknownOption | undefined {
  for (const key in options) {
    if (!Object.prototype.hasOwnProperty.call(options, key) || known.includes(key)) continue;
    return { key, near: findClosestName(key, known) };
  }
  return undefined;
}

/**
 * The option names of an options type, written out once: `Record<keyof T, true>` makes the
 * compiler refuse a name the type lacks and require every name it has, so the list cannot drift.
 */
export function optionNamesOf<T extends object>(names: Record<keyof T, true>): readonly (keyof T & string)[] {
  return Object.freeze(Object.keys(names)) as readonly (keyof T & string)[];
}
