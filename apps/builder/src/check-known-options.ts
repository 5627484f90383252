import { findClosestName } from '@splitzip/codec';
import { BuilderError } from './errors.js';

/** The option names of `T`, checked complete by the compiler (a key missing or extra fails to build). */
export function optionNamesOf<T extends object>(names: Record<keyof T, true>): readonly string[] {
  return Object.freeze(Object.keys(names));
}

/**
 * USAGE for an options object that is not one, or that has a key `known` lacks: a misspelt option
 * (`rebind` for `rebindSlices`) was ignored and the build ran with the default, saying nothing (the
 * runtime's functions refuse them the same way, with the same suggestion).
 */
export function checkKnownOptions(options: unknown, known: readonly string[], functionName: string): void {
  if (typeof options !== 'object' || options === null) {
    throw new BuilderError('USAGE', `${functionName}: options must be an object, got ${options === null ? 'null' : typeof options}`);
  }
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = findClosestName(key, known);
    const suggestion = near === undefined ? '' : `: did you mean ${JSON.stringify(near)}?`;
    throw new BuilderError('USAGE', `${functionName}: unknown option ${JSON.stringify(key)}${suggestion} (known: ${known.join(', ')})`);
  }
}
