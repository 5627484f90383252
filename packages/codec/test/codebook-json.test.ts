import { describe, expect, it } from 'vitest';
import { codebookFromJson, codebookToJson, createCodebook, SplitZipError } from '../src/index.js';

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
});
