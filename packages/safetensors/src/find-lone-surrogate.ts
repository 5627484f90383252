/** A UTF-16 surrogate without its pair: not Unicode text, and not encodable as UTF-8. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `text` holds a lone surrogate (String.prototype.isWellFormed, which Node 20's TS lib lacks). */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/**
 * The first string (key or value, at any depth) of a parsed JSON value that holds a lone surrogate,
 * or undefined. `text` is the JSON it was parsed from: fatal UTF-8 decoding leaves no surrogate in
 * raw text, so only a `\uD800`-`\uDFFF` escape can make one, and text without such an escape is
 * not walked. Without recursion (a header may nest thousands of arrays).
 */
export function findLoneSurrogateString(text: string, root: unknown): string | undefined {
  if (!/\\u[dD][89abcdefABCDEF]/.test(text)) return undefined;
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (hasLoneSurrogate(value)) return value;
    } else if (Array.isArray(value)) {
      for (const item of value) stack.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (hasLoneSurrogate(key)) return key;
        stack.push(item);
      }
    }
  }
  return undefined;
}
