/** A key that appears twice in one JSON object, where it was found, and the keys of the objects around it. */
export interface DuplicateJsonKey {
  key: string;
  /** Character offset of its second occurrence. */
  position: number;
  /** Keys leading to the object that holds it, `[]` for an array element: empty at the top level, `['entries', '<key>']` in a manifest entry. */
  path: string[];
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
  // Per open container: keys seen (an array while small, then a Set), or null for an array.
  const stack: (string[] | Set<string> | null)[] = [];
  // Per open container: the key it is the value of (undefined for an array element or the top level).
  const names: (string | undefined)[] = [];
  let lastKey: string | undefined;
  let expectKey = false;
  const length = text.length;
  let nextBackslash = indexOrLength(text, '\\', 0);
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let end = indexOrLength(text, '"', i + 1);
      let escaped = false;
      if (nextBackslash < end) {
        // This string holds an escape: walk it to find its real end.
        escaped = true;
        end = i + 1;
        while (end < length) {
          const d = text.charCodeAt(end);
          if (d === 0x5c /* \ */) end += 2;
          else if (d === 0x22) break;
          else end += 1;
        }
        nextBackslash = indexOrLength(text, '\\', end + 1);
      }
      const keys = stack.length > 0 ? stack[stack.length - 1] : null;
      if (expectKey && keys) {
        const key = escaped ? (JSON.parse(text.slice(i, end + 1)) as string) : text.slice(i + 1, end);
        if (Array.isArray(keys) ? keys.includes(key) : keys.has(key)) {
          return { key, position: i, path: names.slice(1).map((name) => name ?? '[]') };
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
    } else if (c === 0x2c /* , */) {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    }
    i += 1;
  }
  return undefined;
}

function indexOrLength(text: string, needle: string, from: number): number {
  const at = text.indexOf(needle, from);
  return at < 0 ? text.length : at;
}
