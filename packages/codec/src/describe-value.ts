/** How many characters of a caller's value a message shows (a 16M-value array or a 1 MB string shown whole made a message of that size, after seconds of JSON). */
const MAX_SHOWN_CHARS = 60;

/**
 * Arrays inside an object longer than this are shown by tag and length: every item takes at least
 * two characters (`0,`), so no longer one fits in MAX_SHOWN_CHARS anyway.
 */
const MAX_LISTED_ITEMS = MAX_SHOWN_CHARS / 2;

/** Cut to MAX_SHOWN_CHARS, never between the two halves of a surrogate pair (half an emoji shows as U+FFFD). */
const cut = (text: string): string => {
  if (text.length <= MAX_SHOWN_CHARS) return text;
  const end = MAX_SHOWN_CHARS - 3;
  const last = text.charCodeAt(end - 1);
  return `${text.slice(0, last >= 0xd800 && last <= 0xdbff ? end - 1 : end)}...`;
};

/** Thrown by the writer once MAX_SHOWN_CHARS are written: what is written so far is shown, cut. */
const FULL = Symbol('full');

/** Thrown on a cycle (or for nothing to write): the object is shown by its tag, as JSON.stringify's TypeError made it before. */
const NO_JSON = Symbol('no JSON');

/**
 * A caller's value for an error message, never throwing: a number as itself, anything else with
 * its type, so a string '5' does not read like the number 5 (`string "5"`, `bigint 10n`,
 * `symbol Symbol(x)`, `object {"a":1}`, `object [null prototype]`), each cut to 60 characters.
 * Arrays and typed arrays are shown by their tag and length; other objects as JSON cut to 60
 * characters, written only that far (an ArrayBuffer, typed array, DataView or long array inside
 * one as `Uint16Array(length n)`, never read item by item); a cycle, a throwing getter or Proxy
 * trap, or no prototype by tag.
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
    if (ArrayBuffer.isView(value) || Array.isArray(value)) {
      const length = (value as { length?: unknown }).length;
      const tag = Object.prototype.toString.call(value);
      return typeof length === 'number' ? `${tag} of length ${length}` : tag;
    }
    return writeJsonPrefix(value);
  } catch {
    // Shown by its tag below.
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return '[unreadable]';
  }
}

/**
 * The object as JSON.stringify writes it (toJSON applied, undefined and functions left out of
 * objects, null in arrays), written piece by piece and stopped at MAX_SHOWN_CHARS: JSON.stringify
 * of the whole object before cutting it read every value of a typed array inside it (seconds for
 * millions of values, a RangeError past the longest string). Throws NO_JSON, or what a getter throws.
 */
function writeJsonPrefix(root: object): string {
  let text = '';
  const ancestors: object[] = [];
  const write = (piece: string): void => {
    text += piece;
    if (text.length > MAX_SHOWN_CHARS) throw FULL;
  };
  const writeValue = (value: unknown): void => {
    switch (typeof value) {
      case 'string':
        // Only what can be shown is quoted: a 1 MB string is not copied whole.
        return write(JSON.stringify(value.slice(0, MAX_SHOWN_CHARS + 1)));
      case 'number':
        return write(Number.isFinite(value) ? String(value) : 'null');
      case 'boolean':
        return write(String(value));
      case 'bigint':
        return write(`${value}n`);
      case 'object':
        break;
      default:
        return write('null'); // undefined, a function or symbol in an array
    }
    if (value === null) return write('null');
    const tag = describeSized(value);
    if (tag !== undefined) return write(tag);
    if (ancestors.includes(value)) throw NO_JSON;
    ancestors.push(value);
    if (Array.isArray(value)) {
      write('[');
      for (let i = 0; i < value.length; i++) {
        if (i > 0) write(',');
        writeValue(toJsonValue(value[i], String(i)));
      }
      write(']');
    } else {
      write('{');
      let first = true;
      for (const key of Object.keys(value)) {
        const item = toJsonValue((value as Record<string, unknown>)[key], key);
        if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
        write(`${first ? '' : ','}${JSON.stringify(key.slice(0, MAX_SHOWN_CHARS + 1))}:`);
        first = false;
        writeValue(item);
      }
      write('}');
    }
    ancestors.pop();
  };
  const json = toJsonValue(root, '');
  // A toJSON giving undefined (JSON.stringify gives no text): shown by tag.
  if (json === undefined || typeof json === 'function' || typeof json === 'symbol') throw NO_JSON;
  try {
    writeValue(json);
  } catch (error) {
    if (error !== FULL) throw error;
    return cut(text);
  }
  return text;
}

/** A value as JSON sees it: its toJSON's result, except for sized objects (a Buffer's toJSON copies every byte). */
function toJsonValue(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null || describeSized(value) !== undefined) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  return unbox(typeof toJSON === 'function' ? (toJSON as (key: string) => unknown).call(value, key) : value);
}

/** A Number, String, Boolean or BigInt object as its primitive, as JSON.stringify takes it (`new Number(5)` is 5). */
function unbox(value: unknown): unknown {
  if (value instanceof Number || value instanceof String || value instanceof Boolean) return value.valueOf();
  if (typeof BigInt === 'function' && value instanceof BigInt) return value.valueOf();
  return value;
}

/** `Uint16Array(length 4000000)` for a typed array, DataView, ArrayBuffer or long array; undefined for anything else. */
function describeSized(value: object): string | undefined {
  if (ArrayBuffer.isView(value)) {
    const name = Object.prototype.toString.call(value).slice(8, -1);
    return value instanceof DataView ? `${name}(byteLength ${value.byteLength})` : `${name}(length ${String((value as unknown as { length: unknown }).length)})`;
  }
  if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer)) {
    return `${Object.prototype.toString.call(value).slice(8, -1)}(byteLength ${value.byteLength})`;
  }
  if (Array.isArray(value) && value.length > MAX_LISTED_ITEMS) return `Array(length ${value.length})`;
  return undefined;
}
