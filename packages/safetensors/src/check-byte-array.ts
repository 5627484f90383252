import { SafetensorsError } from './errors.js';

/**
 * Refuses (INVALID_ARGUMENT) anything but bytes: a Uint8Array (or a subclass) or a
 * Uint8ClampedArray. Other views were measured in elements (a Uint16Array lost its high bytes, a
 * "file" of half its size), or not at all (a DataView counted NaN bytes); null threw a TypeError.
 */
export function checkByteArray(value: unknown, name: string, file: string): void {
  if (value instanceof Uint8Array || value instanceof Uint8ClampedArray) return;
  const kind = value === null ? 'null' : typeof value === 'object' ? ((value as object).constructor?.name ?? 'object') : typeof value;
  throw new SafetensorsError('INVALID_ARGUMENT', `${name} must be a Uint8Array, got ${kind}`, { file });
}
