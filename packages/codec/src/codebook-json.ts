import { createCodebook, ensureCodebook, type Codebook } from './create-codebook.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';

/**
 * How much of JSON.parse's message an error keeps: the engine's message quotes the text around the
 * fault, and a caller's text can be anything (megabytes); the start of the message says what broke.
 */
const MAX_PARSER_MESSAGE_CHARS = 200;

/**
 * The longest codebook JSON text `codebookFromJson` parses. A valid codebook is 16 exponents of
 * at most 3 digits, under 100 characters even pretty-printed; 4096 leaves room for any formatting
 * while a caller's text (a request body, a file) cannot make JSON.parse build megabytes of values
 * only to be refused.
 */
export const MAX_CODEBOOK_JSON_CHARS = 4096;

/** How many of a refused object's keys, and how much of each, `details.keys` keeps (a wrong key is in the first few). */
const MAX_DETAIL_KEYS = 8;
const MAX_DETAIL_KEY_CHARS = 64;

/** Plain JSON form of a codebook: `{ "exponents": [126, 125, ...] }`. */
export interface CodebookJson {
  exponents: number[];
}

export function codebookToJson(codebook: Codebook): CodebookJson {
  return { exponents: [...ensureCodebook(codebook).exponents] };
}

/**
 * Parses and validates a codebook from untrusted JSON: the parsed value (`{ exponents: [...] }`) or
 * its text (as read from a file or a request body); throws INVALID_CODEBOOK.
 */
export function codebookFromJson(json: unknown): Codebook {
  // A string is the JSON text: before, it was refused as "must be an object", invalid text too.
  // A String object is its text as well: as an object its keys were every character's index.
  const text = typeof json === 'string' ? json : json instanceof String ? json.valueOf() : undefined;
  const value = text === undefined ? json : parseJsonText(text);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const got = describeValue(value);
    throw new SplitZipError('INVALID_CODEBOOK', `codebook JSON must be an object, got ${got}`, { got });
  }
  return codebookFromObject(value);
}

function parseJsonText(text: string): unknown {
  if (text.length > MAX_CODEBOOK_JSON_CHARS) {
    throw new SplitZipError(
      'INVALID_CODEBOOK',
      `codebook JSON text is ${text.length} characters, more than MAX_CODEBOOK_JSON_CHARS (${MAX_CODEBOOK_JSON_CHARS}); a codebook is under 100`,
      { textLength: text.length, maxChars: MAX_CODEBOOK_JSON_CHARS },
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const full = error instanceof Error ? error.message : String(error);
    const parserMessage = full.length > MAX_PARSER_MESSAGE_CHARS ? `${full.slice(0, MAX_PARSER_MESSAGE_CHARS - 3)}...` : full;
    throw new SplitZipError('INVALID_CODEBOOK', `codebook JSON text is not valid JSON: ${parserMessage}`, {
      parserMessage,
      textLength: text.length,
    });
  }
}

function codebookFromObject(json: object): Codebook {
  const keys = Object.keys(json);
  if (keys.length !== 1 || keys[0] !== 'exponents') {
    // Only the first keys: an object (a caller's, or parsed text) can have any number.
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook JSON must have exactly one key, "exponents"', {
      keys: keys.slice(0, MAX_DETAIL_KEYS).map((key) => (key.length > MAX_DETAIL_KEY_CHARS ? `${key.slice(0, MAX_DETAIL_KEY_CHARS - 3)}...` : key)),
      keyCount: keys.length,
    });
  }
  const exponents = (json as { exponents: unknown }).exponents;
  if (!Array.isArray(exponents)) {
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook JSON "exponents" must be an array', {});
  }
  return createCodebook(exponents as number[]);
}
