import { checkStringArgument } from './check-header-arguments.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';

/** A key that appears twice in one JSON object, where it was found, and the keys of the objects around it. */
export interface DuplicateJsonKey {
  key: string;
  /** Character offset of its second occurrence. */
  position: number;
  /** Keys leading to the object that holds it, `[]` for an array element: empty at the top level, `['entries', '<key>']` in a manifest entry. */
  path: string[];
}

/** What scanJsonValue found: where the value ends, and the first key repeated inside it. */
export interface JsonValueScan {
  /** One past the value's last character (where the scan stopped, when it found a duplicate). */
  end: number;
  /** The first key repeated in one of its objects; `path` starts inside the value. */
  duplicate: DuplicateJsonKey | undefined;
}

/**
 * The first key that appears twice in the same object of `text`, at any depth, which must be valid
 * JSON (parse it first). JSON.parse keeps the last value of a repeated key without a word: a header
 * could hide a tensor entry, a cache manifest with a second `"entries": {}` would open empty (the
 * store uses this too). Keys are compared decoded ("a" and "\u0061" are the same key). One linear
 * pass without recursion (strings are skipped with indexOf): a 58 MB manifest of 80k entries took
 * 170-430 ms here against 480-730 ms for its JSON.parse (a bare loop over its characters: 100-150 ms).
 */
export function findDuplicateJsonKey(text: string): DuplicateJsonKey | undefined {
  checkStringArgument(text, 'text');
  return scanJson(text, 0, false, undefined).duplicate;
}

/**
 * findDuplicateJsonKey, and in the same pass, for each top-level key (a header's tensor names) the
 * fields of its value that hold a number spelled with a fraction or an exponent (`1.0`, `1e0`,
 * `4E2`) or as `-0`: JSON.parse makes integers of them, while the reference implementation (serde
 * into usize; serde_json reads -0 as a float) refuses them in `shape` and `data_offsets`. Outside
 * strings a '.', an 'e' after a digit or a '-' before a '0' only occur in numbers ("true" and
 * "false" have no digit before their e). `floatSpelled` is undefined when there is none.
 */
export function scanSafetensorsHeaderJson(text: string): { duplicate: DuplicateJsonKey | undefined; floatSpelled: Map<string, Set<string>> | undefined } {
  const floatSpelled = new Map<string, Set<string>>();
  const { duplicate } = scanJson(text, 0, false, floatSpelled);
  return { duplicate, floatSpelled: floatSpelled.size > 0 ? floatSpelled : undefined };
}

/**
 * Finds the end of the JSON value that starts at `from` (white space before it is skipped) and
 * the first key repeated in it, in one pass over that value only: for a reader that parses a large
 * document a piece at a time (JSON.parse of each piece), so that each piece's tree dies young. The
 * value must be valid JSON: for invalid text the end is wherever the scan stopped, and the caller's
 * JSON.parse of the piece (or of the text around it) is what refuses it.
 */
export function scanJsonValue(text: string, from: number): JsonValueScan {
  checkStringArgument(text, 'text');
  if (typeof from !== 'number' || !Number.isSafeInteger(from) || from < 0 || from > text.length) {
    throw new SafetensorsError('INVALID_ARGUMENT', `from must be an index into text (0 to ${text.length}), got ${quoteValue(from)}`);
  }
  return scanJson(text, from, true, undefined);
}

/** `floatSpelled`: where given, filled as scanSafetensorsHeaderJson describes. */
function scanJson(text: string, from: number, oneValue: boolean, floatSpelled: Map<string, Set<string>> | undefined): JsonValueScan {
  // Per open container: keys seen (an array while small, then a Set), or null for an array.
  const stack: (string[] | Set<string> | null)[] = [];
  // Per open container: the key it is the value of (undefined for an array element or the top level).
  const names: (string | undefined)[] = [];
  let lastKey: string | undefined;
  let expectKey = false;
  const length = text.length;
  let i = from;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = findStringEnd(text, i);
      const keys = stack.length > 0 ? stack[stack.length - 1] : null;
      if (expectKey && keys) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (Array.isArray(keys) ? keys.includes(key) : keys.has(key)) {
          return { end: i, duplicate: { key, position: i, path: names.slice(1).map((name) => name ?? '[]') } };
        }
        if (Array.isArray(keys)) {
          keys.push(key);
          // Small objects (an entry) stay arrays; large ones (entries) switch to a Set.
          if (keys.length > 16) stack[stack.length - 1] = new Set(keys);
        } else {
          keys.add(key);
        }
        lastKey = key;
        expectKey = false;
      }
      i = end + 1;
      if (oneValue && stack.length === 0) return { end: Math.min(i, length), duplicate: undefined };
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = stack.length > 0 ? stack[stack.length - 1] : null;
      names.push(parent ? lastKey : undefined);
      stack.push(c === 0x7b ? [] : null);
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      names.pop();
      expectKey = false;
      if (oneValue && stack.length === 0) return { end: i + 1, duplicate: undefined };
    } else if (c === 0x2c /* , */) {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    } else if (
      floatSpelled !== undefined &&
      stack.length >= 2 &&
      (c === 0x2e /* . */ || ((c === 0x65 || c === 0x45) /* e E */ && isDigit(text.charCodeAt(i - 1))) || (c === 0x2d /* - */ && text.charCodeAt(i + 1) === 0x30) /* -0 */)
    ) {
      // names[1]: the top-level key whose value holds the number; the field is the key of the
      // container at depth 3 (shape's array), or the last key read for a number right in the entry.
      const top = names[1] ?? '';
      const field = (stack.length >= 3 ? names[2] : lastKey) ?? '';
      let fields = floatSpelled.get(top);
      if (fields === undefined) floatSpelled.set(top, (fields = new Set()));
      fields.add(field);
    } else if (oneValue && stack.length === 0 && !isJsonWhiteSpace(c)) {
      // A number or literal at the top: it runs to the next delimiter.
      while (i < length && !isDelimiter(text.charCodeAt(i))) i += 1;
      return { end: i, duplicate: undefined };
    }
    i += 1;
  }
  return { end: length, duplicate: undefined };
}

/** The index of the quote that closes the string opening at `start` (text.length when there is none). */
function findStringEnd(text: string, start: number): number {
  const length = text.length;
  let end = text.indexOf('"', start + 1);
  if (end < 0) return length;
  // A quote after anything but a backslash closes the string; otherwise walk the escapes.
  if (text.charCodeAt(end - 1) !== 0x5c /* \ */) return end;
  end = start + 1;
  while (end < length) {
    const d = text.charCodeAt(end);
    if (d === 0x5c) end += 2;
    else if (d === 0x22) return end;
    else end += 1;
  }
  return length;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isJsonWhiteSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isDelimiter(c: number): boolean {
  return c === 0x2c /* , */ || c === 0x7d /* } */ || c === 0x5d /* ] */ || isJsonWhiteSpace(c);
}
