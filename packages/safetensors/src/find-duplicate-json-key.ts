/**
 * Finds the first object key repeated within one JSON object, at any depth. JSON.parse keeps the last
 * of two equal keys silently, which would let a header hide a tensor entry.
 *
 * Precondition: `text` is valid JSON (call it after JSON.parse succeeded), so the scan only has to
 * tell strings apart from structure. One pass, linear in the text length; keys with escapes are
 * decoded (so "a" and "\u0061" are the same key).
 */
export function findDuplicateJsonKey(text: string): { key: string; position: number } | undefined {
  // One Set per open object, null per open array.
  const stack: (Set<string> | null)[] = [];
  let expectKey = false;
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      for (;;) {
        const d = text.charCodeAt(j);
        if (d === 0x5c /* \ */) {
          escaped = true;
          j += 2;
        } else if (d === 0x22 || j >= length) {
          break;
        } else {
          j += 1;
        }
      }
      const keys = stack.length > 0 ? stack[stack.length - 1] : null;
      if (expectKey && keys) {
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (keys.has(key)) return { key, position: i };
        keys.add(key);
        expectKey = false;
      }
      i = j + 1;
      continue;
    }
    if (c === 0x7b /* { */) {
      stack.push(new Set());
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
