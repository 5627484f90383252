/**
 * Longest rendering of an untrusted value in an error message: room for any real tensor or shard name,
 * while a hostile one (a 50 MB key, a million-item array) still gives a one-line message.
 */
export const MAX_QUOTED_CHARS = 120;

type Frame = { items: readonly unknown[]; keys?: undefined; next: number } | { record: Record<string, unknown>; keys: string[]; next: number };

/**
 * A short JSON-like rendering of an untrusted value (from a file or a caller) for an error message:
 * at most `maxChars` characters, the rest cut to "...". Never recurses and stops as soon as it has
 * enough: JSON.stringify and String() recurse into nested arrays, and a header holding ~5000 nested
 * `[` (10 KB, which JSON.parse accepts) overflowed the stack while its error message was being built.
 * Calls no toString/toJSON of the value; never throws.
 */
export function quoteValue(value: unknown, maxChars: number = MAX_QUOTED_CHARS): string {
  let out = '';
  try {
    const stack: Frame[] = [];
    let pending = value;
    let hasPending = true;
    // Every step appends at least one character, so this ends after ~maxChars steps at most.
    while (out.length <= maxChars) {
      if (hasPending) {
        hasPending = false;
        if (Array.isArray(pending)) {
          out += '[';
          stack.push({ items: pending, next: 0 });
        } else if (isPlainObject(pending)) {
          out += '{';
          stack.push({ record: pending, keys: Object.keys(pending), next: 0 });
        } else {
          out += quoteScalar(pending, maxChars);
        }
        continue;
      }
      const frame = stack[stack.length - 1];
      if (frame === undefined) break;
      const count = frame.keys === undefined ? frame.items.length : frame.keys.length;
      if (frame.next >= count) {
        out += frame.keys === undefined ? ']' : '}';
        stack.pop();
        continue;
      }
      if (frame.next > 0) out += ',';
      if (frame.keys === undefined) {
        pending = frame.items[frame.next];
      } else {
        const key = frame.keys[frame.next] as string;
        out += `${quoteScalar(key, maxChars)}:`;
        pending = frame.record[key];
      }
      frame.next += 1;
      hasPending = true;
    }
  } catch {
    // A getter or proxy trap of a caller's object threw: what was rendered so far is still useful.
    out += '...';
  }
  return out.length > maxChars ? `${out.slice(0, Math.max(0, maxChars - 3))}...` : out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function quoteScalar(value: unknown, maxChars: number): string {
  switch (typeof value) {
    case 'string':
      // Cut before quoting: escaping is linear in what it is given.
      return JSON.stringify(value.length > maxChars ? value.slice(0, maxChars) : value);
    case 'number':
    case 'boolean':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'undefined':
      return 'undefined';
    case 'object': {
      if (value === null) return 'null';
      // Not plain data (a typed array, a Map, a class instance): its kind only, never its contents.
      const name: unknown = (value as { constructor?: { name?: unknown } }).constructor?.name;
      const kind = typeof name === 'string' && name.length > 0 ? name.slice(0, 40) : 'object';
      return ArrayBuffer.isView(value) ? `${kind}(${value.byteLength} bytes)` : `<${kind}>`;
    }
    default:
      return `<${typeof value}>`;
  }
}
