// Up-front checks of the options objects this package takes, so that a misspelt key or a value of
// the wrong kind is INVALID_ARGUMENT naming the option instead of the default, silently: `{ backnd:
// 'cpu' }` ran auto, `{ verfy: false }` and `{ verify: 'false' }` verified, `{ threads: null }`
// took the default thread count. Only undefined means "the default": null is a value, refused
// where the option takes none. The near name comes from the codec's findClosestName, the one
// 'did you mean' of the packages (the codec refuses its own unknown keys the same way).
import { describeValue, findClosestName, findUnknownOption } from '@splitzip/codec/internal';
import { KernelsError } from './errors.js';

/** The option names of an options type, checked complete by the compiler (the codec's optionNamesOf). */
export { optionNamesOf as optionNames } from '@splitzip/codec/internal';

/**
 * A caller's value as every message here shows it: the codec's describeValue (`string "4"`, `object
 * {"a":1}`, cut to 60 characters; a typed array by tag and length, never read item by item). This
 * package's own quoted a string whole (a 1 MB workerUrl made a 1 MB message) and said only "an
 * object" of an object.
 */
export { describeValue } from '@splitzip/codec/internal';

/**
 * KernelsError INVALID_ARGUMENT for an argument of the wrong type: the codec's argumentTypeError
 * message (`arena must be a shared arena, got object {}`), the value shown in `details.got`, as a
 * KernelsError because the rule is this package's.
 */
export function kernelsArgumentTypeError(argument: string, expected: string, value: unknown, details: Record<string, unknown> = {}): KernelsError {
  const got = describeValue(value);
  return new KernelsError('INVALID_ARGUMENT', `${argument} must be ${expected}, got ${got}`, { argument, got, ...details });
}

/**
 * A per-call `signal`: undefined, or an AbortSignal (any realm's: one with a boolean `aborted`,
 * `addEventListener` and `removeEventListener`). Anything else would be a call that can never be
 * abandoned, unsaid; one without `removeEventListener` made the call hang, its settling throwing an
 * unhandled TypeError.
 */
export function checkSignalOption(value: unknown, argument = 'signal'): asserts value is AbortSignal | undefined {
  if (value === undefined) return;
  const signal = value as { aborted?: unknown; addEventListener?: unknown; removeEventListener?: unknown } | null;
  if (
    typeof signal === 'object' &&
    signal !== null &&
    typeof signal.aborted === 'boolean' &&
    typeof signal.addEventListener === 'function' &&
    typeof signal.removeEventListener === 'function'
  ) {
    return;
  }
  throw kernelsArgumentTypeError(argument, 'an AbortSignal or undefined', value);
}

/** An options argument: an object (undefined, where the caller may leave it out, is handled before). */
export function checkOptionsObject(options: unknown, argument = 'options', call?: string): asserts options is object {
  if (typeof options !== 'object' || options === null) {
    const where = call === undefined ? '' : `${call}: `;
    throw new KernelsError('INVALID_ARGUMENT', `${where}${argument} must be an object or undefined, got ${describeValue(options)}`, { argument, got: describeValue(options) });
  }
}

/**
 * No own key outside `known` (a known key set to undefined is fine). `path` prefixes nested
 * options' names (`webgpu.`); `call` says whose options they are.
 */
/** An unknown key's characters kept in details.argument (the message shows 60). */
const MAX_KEY_DETAIL_CHARS = 200;

export function checkOptionKeys(options: object, known: readonly string[], call: string, path = ''): void {
  const unknown = findUnknownOption(options, known);
  if (unknown !== undefined) {
    const { key, near } = unknown;
    const hint = near === undefined ? '' : `: did you mean "${path}${near}"?`;
    // Quoted and cut as describeValue cuts a string (without its type: a key is always one): a
    // 1 MB key made a 1 MB message.
    const shown = describeValue(`${path}${key}`).slice('string '.length);
    throw new KernelsError('INVALID_ARGUMENT', `${call}: unknown option ${shown}${hint} (known: ${known.join(', ')})`, {
      // Cut too (200 characters, as the codec's details.option): details travel into logs and --json.
      argument: `${path}${key}`.length > MAX_KEY_DETAIL_CHARS ? `${`${path}${key}`.slice(0, MAX_KEY_DETAIL_CHARS)}...` : `${path}${key}`,
      known: [...known],
      ...(near === undefined ? {} : { suggestion: `${path}${near}` }),
    });
  }
}

/** A flag: true, false or undefined (a string 'false' is true to an `if`). */
export function checkBooleanOption(value: unknown, argument: string): void {
  if (value === undefined || typeof value === 'boolean') return;
  throw kernelsArgumentTypeError(argument, 'true or false', value, { value: describeValue(value) });
}

/** A count or size: an integer in min..max, or undefined (NaN, null, 1.5 and '4' are refused). */
export function checkIntegerOption(value: unknown, argument: string, min: number, max: number = Number.MAX_SAFE_INTEGER): void {
  if (value === undefined) return;
  if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return;
  const range = max >= Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
  throw new KernelsError('INVALID_ARGUMENT', `${argument} must be an integer ${range}, got ${describeValue(value)}`, {
    argument,
    got: describeValue(value),
    value: describeValue(value),
    min,
    max,
  });
}

/** One of a few names, or undefined; a near miss is named (`'atuo'`: did you mean 'auto'?). */
export function checkChoiceOption(value: unknown, argument: string, choices: readonly string[]): void {
  if (value === undefined || (typeof value === 'string' && choices.includes(value))) return;
  const near = typeof value === 'string' ? findClosestName(value, choices) : undefined;
  const hint = near === undefined ? '' : `: did you mean "${near}"?`;
  throw new KernelsError('INVALID_ARGUMENT', `${argument} must be one of ${choices.join(', ')}, got ${describeValue(value)}${hint}`, {
    argument,
    got: describeValue(value),
    value: describeValue(value),
    known: [...choices],
    ...(near === undefined ? {} : { suggestion: near }),
  });
}
