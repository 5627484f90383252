import { MAX_QUOTED_VALUE_CHARS } from './limits.js';

/**
 * An untrusted value as error-message text, without recursing into it: JSON.stringify or String()
 * of a value nested a few thousand levels deep (valid JSON, valid MessagePack) overflows the stack,
 * and of a long one makes the message as long. Strings are quoted up to MAX_QUOTED_VALUE_CHARS;
 * arrays and objects are named by their type and length only.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value.length <= MAX_QUOTED_VALUE_CHARS
        ? JSON.stringify(value)
        : `${JSON.stringify(value.slice(0, MAX_QUOTED_VALUE_CHARS))}… (${value.length} characters)`;
    case 'number':
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return String(value);
    case 'object':
      if (value === null) return 'null';
      if (Array.isArray(value)) return `an array of ${value.length} item${value.length === 1 ? '' : 's'}`;
      if (ArrayBuffer.isView(value)) return `${value.byteLength} bytes`;
      return 'an object';
    default:
      return `a ${typeof value}`;
  }
}

/** An untrusted value fit for StoreError.details: scalars as they are (long strings cut), anything else described. */
export function detailValue(value: unknown): unknown {
  if (typeof value === 'string') return value.length <= MAX_QUOTED_VALUE_CHARS ? value : describeValue(value);
  if (value !== null && (typeof value === 'object' || typeof value === 'function' || typeof value === 'symbol')) return describeValue(value);
  return value;
}
