import { findUnknownOption } from '@splitzip/codec/internal';
import { BuilderError } from './errors.js';

/** The option names of `T`, checked complete by the compiler (the codec's optionNamesOf). */
export { optionNamesOf } from '@splitzip/codec/internal';

/**
 * USAGE for an options object that is not one, or that has a key `known` lacks: a misspelt option
 * (`rebind` for `rebindSlices`) was ignored and the build ran with the default, saying nothing (the
 * runtime's functions refuse them the same way, with the same suggestion).
 */
export function checkKnownOptions(options: unknown, known: readonly string[], functionName: string): void {
  if (typeof options !== 'object' || options === null) {
    throw new BuilderError('USAGE', `${functionName}: options must be an object, got ${options === null ? 'null' : typeof options}`);
  }
  const unknown = findUnknownOption(options, known);
  if (unknown !== undefined) {
    const { key, near } = unknown;
    const suggestion = near === undefined ? '' : `: did you mean ${JSON.stringify(near)}?`;
    throw new BuilderError('USAGE', `${functionName}: unknown option ${JSON.stringify(key)}${suggestion} (known: ${known.join(', ')})`);
  }
}
