import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';

/**
 * INVALID_ARGUMENT for an argument of the wrong type, showing what the caller passed with its type
 * (`out must be a Uint16Array, got object {"verify":false}`), in the message and in `details.got`:
 * the bare "must be a Uint16Array" left a caller guessing which value reached the slot.
 */
export function argumentTypeError(argument: string, expected: string, value: unknown, hint = ''): SplitZipError {
  const got = describeValue(value);
  return new SplitZipError('INVALID_ARGUMENT', `${argument} must be ${expected}, got ${got}${hint}`, { argument, got });
}
