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

// The user probe: encode(v, { get exponents() { throw } }) on cpu or webasm rejected with the
// caller's own error, and the backend was then taken for broken (every later call ran on codec,
// fallbackReason "cpu failed during encode: boom"); encode(v, undefined) said "must hold 1..16
// exponents" where the codec says what is wrong.
describe('a caller\'s bad codebook or arguments never mark a backend failed', () => {
  const values = modelLikeValues(5_003, 9);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  const boom = new Error('boom');
  const cases: [string, () => [unknown, unknown, unknown?]][] = [
    ['no codebook', () => [values, undefined]],
    ['a null codebook', () => [values, null]],
    ['a Proxy whose every key is undefined', () => [values, new Proxy({}, { get: () => undefined })]],
    ['exponents that are a string', () => [values, { exponents: 'ab' }]],
    ['a codebook whose exponents getter throws', () => [values, { get exponents(): never { throw boom; } }]],
    ['an options object whose chunkSize getter throws', () => [values, codebook, { get chunkSize(): never { throw boom; } }]],
  ];
  const outcome = (error: unknown) => ({ name: (error as Error).name, code: (error as { code?: unknown }).code, message: (error as Error).message });

  it.each(['cpu', 'webasm', 'codec'] as const)('%s: rejects as the codec does, and the next calls still run on it', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      for (const [name, args] of cases) {
        const [v, book, options] = args();
        let expected: unknown;
        try {
          codecEncode(v as Uint16Array, book as never, options as never);
        } catch (error) {
          expected = outcome(error);
        }
        expect(expected, name).toBeDefined();
        const got = await kernels.encode(v as Uint16Array, book as never, options as never).then(
          () => 'resolved',
          (error: unknown) => outcome(error),
        );
        expect(got, name).toEqual(expected);
      }
      expect(kernels.availableBackends).toContain(backend);
      const decoded = await kernels.decode(payload);
      expect([decoded.backend, decoded.fallbackReason]).toEqual([backend, null]);
      const encoded = await kernels.encode(values, codebook);
      expect([encoded.backend, encoded.fallbackReason]).toEqual([backend, null]);
      expect(Array.from(encoded.payload)).toEqual(Array.from(payload));
    } finally {
      await kernels.dispose();
    }
  });
});

describe('Kernels: INVALID_ARGUMENT names its argument', () => {
  const values = modelLikeValues(2_001, 5);
  const payload = codecEncode(values, calibrateCodebook(values).codebook);
  it.each(['codec', 'cpu'] as const)('%s: out and payload of the wrong kind', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      const named = (argument: string) => expect.objectContaining({ name: 'SplitZipError', code: 'INVALID_ARGUMENT', details: expect.objectContaining({ argument }) });
      await expect(kernels.decode(payload, [] as never)).rejects.toEqual(named('out'));
      await expect(kernels.decode(new Uint16Array(8) as never)).rejects.toEqual(named('payload'));
      await expect(kernels.decodeToDevice(null as never)).rejects.toEqual(named('payload'));
      const device = await kernels.decodeToDevice(payload);
      await expect(device.toArray({} as never)).rejects.toEqual(named('out'));
    } finally {
      await kernels.dispose();
    }
  });
});

// The review: decode passed the caller's options object on, so a backend read `verify` again and a
// getter that threw there marked the backend failed; a disposed instance answered a bad argument
// with that argument's error instead of DISPOSED.
describe('kernels calls after the review', () => {
  const values = modelLikeValues(4099, 5);
  const { codebook } = calibrateCodebook(values);
  const payload = codecEncode(values, codebook);
  it.each(['codec', 'cpu'] as const)('%s: decode reads its options once; a getter that throws later never marks the backend failed', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      let reads = 0;
      const options = {
        get verify() {
          reads += 1;
          if (reads > 1) throw new Error('read twice');
          return true;
        },
      };
      const { values: decoded } = await kernels.decode(payload, undefined, options);
      expect(Array.from(decoded)).toEqual(Array.from(values));
      expect(kernels.availableBackends).toContain(backend);
      expect(kernels.backend).toBe(backend);
    } finally {
      await kernels.dispose();
    }
  });

  it.each(['codec', 'cpu'] as const)('%s: a disposed instance answers DISPOSED whatever the arguments', async (backend) => {
    const kernels = await createKernels({ backend });
    await kernels.dispose();
    await expect(kernels.decode(new Uint8Array(8))).rejects.toMatchObject({ code: 'DISPOSED' });
    await expect(kernels.decodeToDevice(null as never)).rejects.toMatchObject({ code: 'DISPOSED' });
    await expect(kernels.encode(values, undefined as never)).rejects.toMatchObject({ code: 'DISPOSED' });
  });
});
