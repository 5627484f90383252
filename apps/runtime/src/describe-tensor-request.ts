import { describeValue } from '@splitzip/codec/internal';

/** Fields of a request shown at most (a model handle or any other object passed by mistake has many). */
const MAX_SHOWN_FIELDS = 6;

/**
 * Characters of the fields listed, past which the rest are left out (`…`): each value is bounded
 * (describeValue, ~70 characters), but six objects' JSON made a message of 500.
 */
const MAX_LISTED_CHARS = 160;

/**
 * A tensor request that is none of the accepted shapes, for INVALID_ARGUMENT: what was received
 * (`{ name: string "w" }`, `string "w"`, `null`), each value as the codec's describeValue shows it
 * (the format of every package's argument messages), and, for the usual slips, what is missing.
 */
export function describeTensorRequest(request: unknown): { received: string; hint: string } {
  if (typeof request !== 'object' || request === null) return { received: describeValue(request), hint: '' };
  // Not by its keys: a typed array's are one per element (Object.keys of a tensor's data passed by mistake).
  if (ArrayBuffer.isView(request) || Array.isArray(request) || request instanceof ArrayBuffer) return { received: describeValue(request), hint: '' };
  let keys: string[];
  try {
    keys = Object.keys(request);
  } catch {
    return { received: describeValue(request), hint: '' }; // a Proxy whose ownKeys trap throws: by its tag
  }
  const record = request as Record<string, unknown>;
  const read = (key: string): unknown => {
    try {
      return record[key];
    } catch {
      return undefined;
    }
  };
  const shown: string[] = [];
  let listedChars = 0;
  for (const key of keys) {
    if (shown.length === MAX_SHOWN_FIELDS || listedChars > MAX_LISTED_CHARS) {
      shown.push('…');
      break;
    }
    // The key cut as describeValue cuts a string (without its quotes): a 1 MB key made a 1 MB message.
    const field = `${describeValue(key).slice('string "'.length, -1)}: ${describeValue(read(key))}`;
    shown.push(field);
    listedChars += field.length;
  }
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
