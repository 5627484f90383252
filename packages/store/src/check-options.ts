// Up-front checks of the options objects (and option-like items) the store's calls take, so that
// a misspelt key or a value of the wrong kind is INVALID_ARGUMENT naming the option, before
// anything is read or written: `gc({ dryrun: true })` ran a real gc that deleted files,
// `verify({ signal: {} })` reported every blob as IO_ERROR damage, `verify(null)` was a bare
// TypeError. Only undefined means "the default": null is a value, refused where an option takes
// none. The near name comes from the codec's findClosestName, the one "did you mean" of the
// packages. Each call is checked once (a for-in over a small literal), not per item of a batch.
import { findUnknownOption, optionNamesOf } from '@splitzip/codec';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError } from './errors.js';
import type { GcOptions, VerifyOptions } from './types.js';

/** An options argument: an object (undefined, where the caller may leave it out, is handled before: a default `= {}`). */
export function checkOptionsObject(options: unknown, call: string, argument = 'options'): asserts options is object {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new StoreError('INVALID_ARGUMENT', `${call}: ${argument} must be an object or undefined, got ${describeValue(options)}`, {
      details: { option: argument, value: detailValue(options) },
    });
  }
}

/** No own key outside `known` (a known key set to undefined is fine); `path` prefixes nested options' names (`s3.`). */
export function checkOptionKeys(options: object, known: readonly string[], call: string, path = ''): void {
  const unknown = findUnknownOption(options, known);
  if (unknown === undefined) return;
  const { key, near } = unknown;
  const hint = near === undefined ? '' : `: did you mean "${path}${near}"?`;
  throw new StoreError('INVALID_ARGUMENT', `${call}: unknown option "${path}${key}"${hint} (known: ${known.join(', ')})`, {
    details: { option: `${path}${key}`, known: [...known], ...(near === undefined ? {} : { suggestion: `${path}${near}` }) },
  });
}

/** A flag: true, false or undefined (the string 'false' is true to an `if`). */
export function checkBooleanOption(value: unknown, option: string, call: string): void {
  if (value === undefined || typeof value === 'boolean') return;
  throw invalidOption(call, option, 'true or false', value);
}

/** A callback, or undefined. */
export function checkFunctionOption(value: unknown, option: string, call: string): void {
  if (value === undefined || typeof value === 'function') return;
  throw invalidOption(call, option, 'a function', value);
}

/** An AbortSignal (by shape: one from another realm or a polyfill counts), or undefined. */
export function checkSignalOption(value: unknown, option: string, call: string): void {
  if (value === undefined) return;
  const signal = value as { aborted?: unknown; addEventListener?: unknown } | null;
  if (typeof signal === 'object' && signal !== null && typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function') return;
  throw invalidOption(call, option, 'an AbortSignal', value);
}

function invalidOption(call: string, option: string, expected: string, value: unknown): StoreError {
  return new StoreError('INVALID_ARGUMENT', `${call}: ${option} must be ${expected} or undefined, got ${describeValue(value)}`, {
    details: { option, value: detailValue(value) },
  });
}

/** verify's options (both stores). */
export function checkVerifyOptions(options: unknown): asserts options is VerifyOptions {
  checkOptionsObject(options, 'verify');
  const { decode, onProgress, signal } = options as VerifyOptions;
  checkBooleanOption(decode, 'decode', 'verify');
  checkFunctionOption(onProgress, 'onProgress', 'verify');
  checkSignalOption(signal, 'signal', 'verify');
}

const GC_OPTIONS = optionNamesOf<GcOptions>({ dryRun: true, minAgeMs: true });

/**
 * gc's options, before anything is removed: `gc({ dryrun: true })` (misspelt) or `gc({ dryRun:
 * 'true' })` ran a real gc that deleted files. `extra`: a store's own names (the S3 store's test switch).
 */
export function checkGcOptions(options: unknown, extra: readonly string[] = []): asserts options is GcOptions {
  checkOptionsObject(options, 'gc');
  checkOptionKeys(options, extra.length === 0 ? GC_OPTIONS : [...GC_OPTIONS, ...extra], 'gc');
  checkBooleanOption((options as GcOptions).dryRun, 'dryRun', 'gc');
}
