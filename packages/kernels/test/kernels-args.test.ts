import { describe, expect, it } from 'vitest';
import { createKernels } from '../src/node.js';

describe('createKernels: null and unchecked options are INVALID_ARGUMENT', () => {
  it.each([
    [null, 'options'],
    [{ backend: 'codec', expectedElementCount: -5 }, 'expectedElementCount'],
    [{ backend: 'codec', expectedElementCount: 'x' }, 'expectedElementCount'],
  ])('%o', async (options, argument) => {
    await expect(createKernels(options as never)).rejects.toMatchObject({ name: 'KernelsError', code: 'INVALID_ARGUMENT', details: { argument } });
  });
});
