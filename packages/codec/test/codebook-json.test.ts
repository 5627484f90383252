import { describe, expect, it, vi } from 'vitest';
import { codebookFromJson, codebookToJson, createCodebook, MAX_CODEBOOK_JSON_CHARS, SplitZipError } from '../src/index.js';

describe('codebook JSON', () => {
  it('round trips through plain JSON', () => {
    const codebook = createCodebook([126, 125, 127, 0, 255]);
    const json = JSON.parse(JSON.stringify(codebookToJson(codebook)));
    expect(json).toEqual({ exponents: [126, 125, 127, 0, 255] });
    expect(codebookFromJson(json).exponents).toEqual(codebook.exponents);
  });

  it('returns frozen codebooks', () => {
    const codebook = createCodebook([1, 2]);
    expect(Object.isFrozen(codebook)).toBe(true);
    expect(Object.isFrozen(codebook.exponents)).toBe(true);
    const json = codebookToJson(codebook);
    json.exponents.push(3);
    expect(codebook.exponents).toEqual([1, 2]);
  });

  const invalid: [string, unknown][] = [
    ['null', null],
    ['a number', 5],
    ['an array', [1, 2]],
    ['missing exponents', {}],
    ['an extra key', { exponents: [1], more: 1 }],
    ['exponents not an array', { exponents: '1,2' }],
    ['empty', { exponents: [] }],
    ['17 entries', { exponents: Array.from({ length: 17 }, (_, k) => k) }],
    ['duplicates', { exponents: [1, 2, 1] }],
    ['a fraction', { exponents: [1.5] }],
    ['a negative', { exponents: [-1] }],
    ['above 255', { exponents: [256] }],
    ['a string', { exponents: ['12'] }],
    ['NaN', { exponents: [Number.NaN] }],
  ];
  for (const [name, json] of invalid) {
    it(`rejects ${name} with INVALID_CODEBOOK`, () => {
      try {
        codebookFromJson(json);
        expect.unreachable();
      } catch (error) {
        expect(error).toBeInstanceOf(SplitZipError);
        expect((error as SplitZipError).code).toBe('INVALID_CODEBOOK');
      }
    });
  }

  it('accepts 16 distinct entries including 0 and 255', () => {
    const exps = [0, 255, ...Array.from({ length: 14 }, (_, k) => 100 + k)];
    expect(codebookFromJson({ exponents: exps }).exponents).toEqual(exps);
  });

  // The text form, as read from a file or a request: before, every string was refused with
  // "codebook JSON must be an object", even JSON.stringify(codebookToJson(cb)) itself.
  it('accepts the JSON text, JSON.stringify(codebookToJson(cb)) included', () => {
    const codebook = createCodebook([126, 125, 127, 0, 255]);
    expect(codebookFromJson(JSON.stringify(codebookToJson(codebook))).exponents).toEqual(codebook.exponents);
    expect(codebookFromJson(' {"exponents": [3]}\n').exponents).toEqual([3]);
  });

  function refusal(json: unknown): SplitZipError {
    try {
      codebookFromJson(json);
    } catch (error) {
      expect(error).toBeInstanceOf(SplitZipError);
      return error as SplitZipError;
    }
    throw new Error('accepted');
  }

  it('says text that is not JSON is not valid JSON, with the parser message', () => {
    for (const text of ['{', '', '{exponents: [1]}', 'x'.repeat(4096)]) {
      const error = refusal(text);
      expect(error.code).toBe('INVALID_CODEBOOK');
      expect(error.message).toContain('codebook JSON text is not valid JSON: ');
      expect(error.message).not.toContain('must be an object');
      let parserMessage = '';
      try {
        JSON.parse(text);
      } catch (parseError) {
        parserMessage = (parseError as Error).message;
      }
      expect(error.details).toMatchObject({ parserMessage, textLength: text.length });
      expect(error.message.length).toBeLessThan(300);
    }
  });

  it("bounds the parser's message (an engine may quote the text)", () => {
    const parse = vi.spyOn(JSON, 'parse').mockImplementationOnce(() => {
      throw new SyntaxError(`Unexpected token in ${'y'.repeat(50_000)}`);
    });
    try {
      const error = refusal('{"exponents":[1]');
      expect(error.message).toContain('not valid JSON: Unexpected token in yyy');
      expect(error.message.length).toBeLessThan(300);
      expect(error.message.endsWith('...')).toBe(true);
    } finally {
      parse.mockRestore();
    }
  });

  it('text of valid JSON that is no codebook object is checked like the value, the value shown', () => {
    expect(refusal('5').message).toContain('codebook JSON must be an object, got 5');
    expect(refusal('[1,2]').message).toContain('codebook JSON must be an object, got object [object Array] of length 2');
    expect(refusal('"{}"').message).toContain('codebook JSON must be an object, got string "{}"');
    expect(refusal('{"exponents":[1,1]}').code).toBe('INVALID_CODEBOOK');
    expect(refusal('{}').message).toContain('exactly one key');
  });

  // Before, JSON.parse ran on text of any length (a 10 MB '[1,1,…]' built 5M values to be refused).
  it('refuses text longer than MAX_CODEBOOK_JSON_CHARS before parsing it, with its length', () => {
    expect(MAX_CODEBOOK_JSON_CHARS).toBe(4096);
    const text = `[${'1,'.repeat(MAX_CODEBOOK_JSON_CHARS)}1]`;
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const error = refusal(text);
      expect(parse).not.toHaveBeenCalled();
      expect(error.code).toBe('INVALID_CODEBOOK');
      expect(error.message).toContain(`codebook JSON text is ${text.length} characters, more than MAX_CODEBOOK_JSON_CHARS (4096)`);
      expect(error.details).toMatchObject({ textLength: text.length, maxChars: 4096 });
    } finally {
      parse.mockRestore();
    }
    // Whitespace around a codebook up to the limit is still fine.
    const padded = `{"exponents":[3]}${' '.repeat(MAX_CODEBOOK_JSON_CHARS - 17)}`;
    expect(padded.length).toBe(MAX_CODEBOOK_JSON_CHARS);
    expect(codebookFromJson(padded).exponents).toEqual([3]);
  });

  // Before, a String object was an object whose keys were its character indexes: "exactly one key",
  // every index in details.keys.
  it('takes a String object as its text', () => {
    expect(codebookFromJson(new String('{"exponents":[7,8]}')).exponents).toEqual([7, 8]);
    const error = refusal(new String('{"exponents":[1,1]}'));
    expect(error.code).toBe('INVALID_CODEBOOK');
    expect(error.message).not.toContain('exactly one key');
  });

  it('keeps details.keys bounded for an object with many keys', () => {
    const many = Object.fromEntries(Array.from({ length: 1000 }, (_, k) => [`k${k}${'z'.repeat(k === 0 ? 500 : 0)}`, k]));
    const error = refusal(many);
    expect(error.message).toContain('exactly one key');
    const keys = (error.details as { keys: string[] }).keys;
    expect(keys.length).toBeLessThanOrEqual(8);
    expect(keys.every((key) => key.length <= 64)).toBe(true);
    expect(error.details).toMatchObject({ keyCount: 1000 });
  });
});
