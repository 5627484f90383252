import { argumentTypeError } from './argument-type-error.js';
import { allocateArray } from './allocate-array.js';
import { readOptions } from './check-options.js';
import { optionNamesOf } from './find-unknown-option.js';
import { checkNoOverlap } from './check-overlap.js';
import { checkReadableView, isUint16Array } from './typed-array-kind.js';
import { decodeValueRange } from './decode-core.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';
import { readPayloadMeta } from './read-payload-meta.js';
import { verifyPayloadChecksum } from './verify-payload-checksum.js';

export interface DecodeOptions {
  /** Check the payload's XXH32 first (default true). It covers the whole payload, even for a small range. */
  verify?: boolean | undefined;
}

/** The keys decode and decodeRange accept. */
export const DECODE_OPTION_NAMES = optionNamesOf<DecodeOptions>({ verify: true });

/**
 * Whether decode options turn the checksum off: `verify: false` only. Anything but a boolean or
 * undefined is refused: `verify: 'false'` (a flag read from a query string or an env variable)
 * verified, unlike what its caller meant.
 */
export function skipsChecksum(options: DecodeOptions | undefined): boolean {
  const verify = options?.verify;
  if (verify !== undefined && typeof verify !== 'boolean') {
    throw new SplitZipError('INVALID_ARGUMENT', `options.verify must be a boolean (or undefined), got ${describeValue(verify)}`, { argument: 'options.verify' });
  }
  return verify === false;
}

/** Decodes values [start, start + count) into out[0 .. count) (allocated if absent) and returns it. */
export function decodeRange(payload: Uint8Array, start: number, count: number, out?: undefined, options?: DecodeOptions | null): Uint16Array<ArrayBuffer>;
export function decodeRange<TBuffer extends ArrayBufferLike>(
  payload: Uint8Array,
  start: number,
  count: number,
  out: Uint16Array<TBuffer>,
  options?: DecodeOptions | null,
): Uint16Array<TBuffer>;
export function decodeRange(payload: Uint8Array, start: number, count: number, out?: Uint16Array, options?: DecodeOptions | null): Uint16Array;
export function decodeRange(
  payload: Uint8Array,
  start: number,
  count: number,
  out?: Uint16Array,
  decodeOptions?: DecodeOptions | null,
): Uint16Array {
  const meta = readPayloadMeta(payload);
  const options = readOptions(decodeOptions, 'options', DECODE_OPTION_NAMES);
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0) {
    throw new SplitZipError('INVALID_ARGUMENT', `start and count must be non-negative integers, got ${describeValue(start)} and ${describeValue(count)}`, {
      start,
      count,
    });
  }
  if (start + count > meta.elementCount) {
    throw new SplitZipError('INVALID_ARGUMENT', `range [${start}, ${start + count}) is outside the payload's ${meta.elementCount} values`, {
      start,
      count,
      elementCount: meta.elementCount,
    });
  }
  const target = checkOutput(out, count, DECODE_RANGE_CALL);
  checkOutputApart(payload, meta.compBytes, target, count);
  if (!skipsChecksum(options)) verifyPayloadChecksum(payload, meta);
  decodeValueRange(payload, meta, start, start + count, target, 0);
  return target;
}

/** The call forms the options-as-out hint shows, so it names the function the caller called. */
export const DECODE_CALL = 'decode(payload, undefined, { verify: false })';
const DECODE_RANGE_CALL = 'decodeRange(payload, start, count, undefined, { verify: false })';

/**
 * What the options-as-out hint of a decoder says: `optionNames`, the keys of an object passed as
 * `out` that make it look like options (the function's own, and those of its siblings a caller may
 * take it to share: decodeChunks takes none); `advice`, the function's right form.
 */
export interface OptionsAsOutHint {
  optionNames: readonly string[];
  advice: string;
}

/** For the decoders whose `out` is required (decodeChunks, decodeSegments), then as checkOutput; `hint` in the function's own words. */
export function requireOutput(out: Uint16Array, count: number, hint: OptionsAsOutHint): Uint16Array {
  // Omitted, the values would go to a throwaway array and the call return nothing.
  if (!isUint16Array(out)) {
    throw argumentTypeError('out', 'a Uint16Array (required)', out, optionsAsOutHint(out, hint));
  }
  return checkOutputWith(out, count, hint);
}

/** `call`: the caller's function (decode, decodeRange) in its right form, for the options-as-out hint. */
export function checkOutput(out: Uint16Array | undefined, count: number, call: string): Uint16Array {
  return checkOutputWith(out, count, { optionNames: DECODE_OPTION_NAMES, advice: `options come after out, e.g. ${call}` });
}

function checkOutputWith(out: Uint16Array | undefined, count: number, hint: OptionsAsOutHint): Uint16Array {
  if (out === undefined) return allocateArray(Uint16Array, count, 'the output', 'values');
  if (!isUint16Array(out)) throw argumentTypeError('out', 'a Uint16Array', out, optionsAsOutHint(out, hint));
  checkReadableView(out, 'out');
  if (out.length < count) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${out.length} values, ${count} needed`, {
      outLength: out.length,
      needed: count,
    });
  }
  return out;
}

/**
 * A hint for options passed where `out` goes (`decode(p, { verify: false })`): an object whose own
 * keys are all `hint.optionNames`, so the caller meant the function's form in `hint.advice`
 * (`decode(p, undefined, { verify: false })`; each function its own: decodeRange's, decodeChunks'
 * and decodeSegments' hints showed decode's).
 */
function optionsAsOutHint(out: unknown, hint: OptionsAsOutHint): string {
  if (out === null || typeof out !== 'object' || ArrayBuffer.isView(out)) return '';
  try {
    const keys = Object.keys(out);
    if (keys.length === 0 || !keys.every((key) => hint.optionNames.includes(key))) return '';
  } catch {
    return '';
  }
  return ` (it looks like options were passed as out: ${hint.advice})`;
}

/** INVALID_ARGUMENT when out's first `count` values share bytes with the payload's `compBytes`. */
export function checkOutputApart(payload: Uint8Array, compBytes: number, out: Uint16Array, count: number): void {
  checkNoOverlap(payload, compBytes, out, 2 * count, 'out overlaps the payload');
}
