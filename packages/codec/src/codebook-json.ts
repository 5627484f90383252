import { createCodebook, ensureCodebook, type Codebook } from './create-codebook.js';
import { SplitZipError } from './errors.js';

/** Plain JSON form of a codebook: `{ "exponents": [126, 125, ...] }`. */
export interface CodebookJson {
  exponents: number[];
}

export function codebookToJson(codebook: Codebook): CodebookJson {
  return { exponents: [...ensureCodebook(codebook).exponents] };
}

/** Parses and validates a codebook from an untrusted JSON value; throws INVALID_CODEBOOK. */
export function codebookFromJson(json: unknown): Codebook {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new SplitZipError('INVALID_CODEBOOK', 'codebook JSON must be an object', {});
  }
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
