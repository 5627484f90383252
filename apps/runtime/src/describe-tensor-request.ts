/** Characters of a caller's string a message shows (a huge string would make a message its size). */
const MAX_SHOWN_CHARS = 60;

/**
 * A caller's value for a message, bounded whatever its size: a string quoted (cut) with its type, a
 * number as itself, an object by its class (a typed array or array with its length).
 */
export function describeField(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `string ${JSON.stringify(value.length > MAX_SHOWN_CHARS ? `${value.slice(0, MAX_SHOWN_CHARS - 3)}...` : value)}`;
    case 'number':
      return String(value);
    case 'object':
      if (value === null) return 'null';
      try {
        const name = (value as object).constructor?.name ?? 'object';
        if (ArrayBuffer.isView(value) && 'length' in value) return `${name} of length ${String(value.length)}`;
        return Array.isArray(value) ? `${name} of length ${value.length}` : name;
      } catch {
        return 'object';
      }
    default:
      return typeof value;
  }
}

/** Fields of a request shown at most (a model handle or any other object passed by mistake has many). */
const MAX_SHOWN_FIELDS = 6;

/**
 * A tensor request that is none of the accepted shapes, for INVALID_ARGUMENT: what was received
 * (`{ name: string "w" }`, `string "w"`, `null`) and, for the usual slips, what is missing.
 */
export function describeTensorRequest(request: unknown): { received: string; hint: string } {
  if (typeof request !== 'object' || request === null) return { received: describeField(request), hint: '' };
  // Not by its keys: a typed array's are one per element (Object.keys of a tensor's data passed by mistake).
  if (ArrayBuffer.isView(request) || Array.isArray(request) || request instanceof ArrayBuffer) return { received: describeField(request), hint: '' };
  let keys: string[];
  try {
    keys = Object.keys(request);
  } catch {
    return { received: 'object', hint: '' };
  }
  const record = request as Record<string, unknown>;
  const read = (key: string): unknown => {
    try {
      return record[key];
    } catch {
      return undefined;
    }
  };
  const shown = keys.slice(0, MAX_SHOWN_FIELDS).map((key) => `${key}: ${describeField(read(key))}`);
  if (keys.length > MAX_SHOWN_FIELDS) shown.push('…');
  const received = `{ ${shown.join(', ')} }`;
  let hint = '';
  const name = read('name');
  const model = read('model');
  if (name !== undefined && model === undefined) {
    hint = ': a request by name carries its model, { model, name } (options.model is for bare SliceKeys)';
  } else if (name !== undefined && typeof name !== 'string') {
    hint = ': name must be a string';
  } else if ('slice' in record) {
    hint = ': slice must be a SliceKey { shardName, offsetBytes, sizeBytes }';
  }
  return { received, hint };
}
