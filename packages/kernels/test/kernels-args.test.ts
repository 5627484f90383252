import { runInNewContext } from 'node:vm';
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createKernels } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

describe('createKernels: null and unchecked options are INVALID_ARGUMENT', () => {
  it.each([
    [null, 'options'],
    [{ backend: 'codec', expectedElementCount: -5 }, 'expectedElementCount'],
    [{ backend: 'codec', expectedElementCount: 'x' }, 'expectedElementCount'],
  ])('%o', async (options, argument) => {
    await expect(createKernels(options as never)).rejects.toMatchObject({ name: 'KernelsError', code: 'INVALID_ARGUMENT', details: { argument } });
  });
});

describe('kernels take the codec\'s array rules', () => {
  const values = modelLikeValues(10_007, 3);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  it.each(['codec', 'cpu'] as const)('%s: out from another realm decodes; a detached out or values is INVALID_ARGUMENT', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      const foreign = runInNewContext('new Uint16Array(n)', { n: values.length }) as Uint16Array;
      const { values: decoded } = await kernels.decode(payload, foreign);
      expect(Array.from(decoded)).toEqual(Array.from(values));
      const detached = new Uint16Array(values.length);
      structuredClone(detached.buffer, { transfer: [detached.buffer] });
      await expect(kernels.decode(payload, detached)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(kernels.encode(detached, codebook)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await kernels.dispose();
    }
  });
});
