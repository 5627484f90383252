/** How many characters of a caller's value a message shows (a 16M-value array or a 1 MB string shown whole made a message of that size, after seconds of JSON). */
const MAX_SHOWN_CHARS = 60;

const cut = (text: string): string => (text.length > MAX_SHOWN_CHARS ? `${text.slice(0, MAX_SHOWN_CHARS - 3)}...` : text);

/**
 * A caller's value for an error message, never throwing: a number as itself, anything else with
 * its type, so a string '5' does not read like the number 5 (`string "5"`, `bigint 10n`,
 * `symbol Symbol(x)`, `object {"a":1}`, `object [null prototype]`), each cut to 60 characters.
 * Arrays and typed arrays are shown by their tag and length; other objects as JSON when it is
 * short, else (a cycle, a BigInt inside, a throwing getter or Proxy trap, no prototype) by tag.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'string':
      return `string ${JSON.stringify(cut(value))}`;
    case 'bigint':
      return `bigint ${cut(`${value}n`)}`;
    case 'symbol':
      return `symbol ${cut(value.toString())}`;
    case 'undefined':
      return 'undefined';
    case 'boolean':
      return `boolean ${value}`;
    case 'function':
      return 'function';
    default:
      return value === null ? 'null' : `object ${describeObject(value as object)}`;
  }
}

function describeObject(value: object): string {
  try {
    if (Object.getPrototypeOf(value) === null) return '[null prototype]';
    // Length first: JSON of a large array is slow and as large as the array.
    if (ArrayBuffer.isView(value) || Array.isArray(value)) {
      const length = (value as { length?: unknown }).length;
      const tag = Object.prototype.toString.call(value);
      return typeof length === 'number' ? `${tag} of length ${length}` : tag;
    }
    const json = JSON.stringify(value);
    if (typeof json === 'string' && json.length <= MAX_SHOWN_CHARS) return json;
  } catch {
    // Shown by its tag below.
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return '[unreadable]';
  }
}
