/**
 * For each top-level key of a JSON object text (a header's tensor names), the fields of its value
 * that hold a number spelled with a fraction or an exponent (`1.0`, `1e0`, `4E2`) or as `-0`: JSON.parse
 * makes integers of them (0 of -0), while the reference implementation (serde into usize) refuses
 * them in `shape` and `data_offsets` (serde_json reads -0 as a float). undefined when there is none. `text` must be valid JSON (parsed already). One
 * pass, no recursion; strings skipped with indexOf (a '.' or an 'e' after a digit outside strings
 * only occurs in numbers: "true" and "false" have no digit before their e; a '-' only starts one).
 */
export function findFloatSpelledNumbers(text: string): Map<string, Set<string>> | undefined {
  let found: Map<string, Set<string>> | undefined;
  const containers: boolean[] = []; // true: object
  let expectKey = false;
  let topKey = '';
  let fieldKey = '';
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = findStringEnd(text, i);
      if (expectKey) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (containers.length === 1) topKey = key;
        else if (containers.length === 2) fieldKey = key;
        expectKey = false;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      containers.push(c === 0x7b);
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      containers.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      expectKey = containers[containers.length - 1] === true;
    } else if (c === 0x2e /* . */ || ((c === 0x65 || c === 0x45) /* e E */ && isDigit(text.charCodeAt(i - 1))) || (c === 0x2d /* - */ && text.charCodeAt(i + 1) === 0x30 /* 0 */)) {
      if (containers.length >= 2) {
        found ??= new Map();
        let fields = found.get(topKey);
        if (fields === undefined) found.set(topKey, (fields = new Set()));
        fields.add(fieldKey);
      }
    }
    i += 1;
  }
  return found;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** The index of the quote that closes the string opening at `start` (text.length when there is none). */
function findStringEnd(text: string, start: number): number {
  const length = text.length;
  let end = text.indexOf('"', start + 1);
  if (end < 0) return length;
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
