/**
 * Finds the first object key repeated within one JSON object, at any depth. JSON.parse keeps the last
 * of two equal keys silently, which would let a header hide a tensor entry.
 *
 * Precondition: `text` is valid JSON (call it after JSON.parse succeeded), so the scan only has to
 * tell strings apart from structure. One pass, linear in the text length: strings are skipped with
 * indexOf, and only strings that hold a backslash are walked character by character (their keys are
 * decoded, so "a" and "\u0061" are the same key).
 */
export function findDuplicateJsonKey(text: string): { key: string; position: number } | undefined {
  // Per open container: keys seen (an array while small, then a Set), or null for an array.
  const stack: (string[] | Set<string> | null)[] = [];
  let expectKey = false;
  const length = text.length;
  // Position of the next backslash at or after the scan point (length when there is none).
  let nextBackslash = indexOrLength(text, '\\', 0);
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let end = indexOrLength(text, '"', i + 1);
      let escaped = false;
      if (nextBackslash < end) {
        // Slow path: this string holds an escape; walk it to find its real end.
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
        if (Array.isArray(keys)) {
          if (keys.includes(key)) return { key, position: i };
          keys.push(key);
          // Small objects (tensor entries) stay arrays; large ones (the top level) switch to a Set.
          if (keys.length > 16) stack[stack.length - 1] = new Set(keys);
        } else {
          if (keys.has(key)) return { key, position: i };
          keys.add(key);
        }
        expectKey = false;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b /* { */) {
      stack.push([]);
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      stack.push(null);
      expectKey = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
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
