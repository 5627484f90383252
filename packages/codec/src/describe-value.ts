/**
 * A caller's value for an error message, never throwing: a number as itself, anything else with
 * its type, so a string '5' does not read like the number 5 (`string "5"`, `bigint 10n`,
 * `symbol Symbol(x)`, `object {"a":1}`, `object [null prototype]`). Objects are shown as JSON up
 * to 60 characters; one JSON cannot show (a cycle, a BigInt inside, a throwing getter or Proxy
 * trap, no prototype) by its tag.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'string':
      return `string ${JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value)}`;
    case 'bigint':
      return `bigint ${value}n`;
    case 'symbol':
      return `symbol ${value.toString()}`;
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
    const json = JSON.stringify(value);
    if (typeof json === 'string' && json.length <= 60) return json;
  } catch {
    // Shown by its tag below.
  }
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return '[unreadable]';
  }
}
