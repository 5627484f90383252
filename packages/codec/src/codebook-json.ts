import { createCodebook, ensureCodebook, type Codebook } from './create-codebook.js';
import { describeValue } from './describe-value.js';
import { SplitZipError } from './errors.js';

/**
 * How much of JSON.parse's message an error keeps: the engine's message quotes the text around the
 * fault, and a caller's text can be anything (megabytes); the start of the message says what broke.
 */
const MAX_PARSER_MESSAGE_CHARS = 200;

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
  const value = typeof json === 'string' ? parseJsonText(json) : json;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const got = describeValue(value);
    throw new SplitZipError('INVALID_CODEBOOK', `codebook JSON must be an object, got ${got}`, { got });
  }
  return codebookFromObject(value);
}

function parseJsonText(text: string): unknown {
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
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook JSON must have exactly one key, "exponents"', { keys });
  }
  const exponents = (json as { exponents: unknown }).exponents;
  if (!Array.isArray(exponents)) {
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook JSON "exponents" must be an array', {});
  }
  return createCodebook(exponents as number[]);
}
