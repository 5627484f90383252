import { SplitZipError } from './errors.js';

/**
 * A new zeroed typed array, or INVALID_ARGUMENT where the engine cannot make it: past its largest
 * typed array (V8 in Node 20: 2^32 elements, so a payload of more than ~2.86e9 values, 1.5 bytes
 * each, cannot be one Uint8Array although MAX_ELEMENT_COUNT allows the values) or out of memory.
 * Both surface as a bare RangeError otherwise.
 */
export function allocateArray<T extends Uint8Array | Uint16Array>(
  Kind: new (length: number) => T,
  length: number,
  what: string,
  unit: 'bytes' | 'values',
): T {
  try {
    return new Kind(length);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new SplitZipError('INVALID_ARGUMENT', `cannot allocate ${what}, ${length} ${unit}, on this platform (${error.message})`, {
      argument: what,
      length,
      cause: error.message,
    });
  }
}
