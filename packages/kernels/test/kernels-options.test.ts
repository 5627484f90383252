// The user probe's findings: createKernels' options and each call's were read with `??` and
// `!== false`, so a misspelt key (`backnd`, `verfy`), `null`, NaN or a string where a flag goes
// quietly gave the default: the caller believed a backend was chosen or verification was off.
import { calibrateCodebook, encode as codecEncode, isSplitZipError } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createKernels as createBrowserKernels } from '../src/index.js';
import { createKernels } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const values = modelLikeValues(5_003);
const { codebook } = calibrateCodebook(values);
const payload = codecEncode(values, codebook);

const invalid = (argument: string, suggestion?: string) =>
  expect.objectContaining({
    name: 'KernelsError',
    code: 'INVALID_ARGUMENT',
    details: expect.objectContaining({ argument, ...(suggestion === undefined ? {} : { suggestion }) }),
    ...(suggestion === undefined ? {} : { message: expect.stringContaining(`did you mean "${suggestion}"?`) }),
  });

describe('createKernels: unknown option keys are INVALID_ARGUMENT, with the near name', () => {
  it.each([
    [{ backnd: 'cpu' }, 'backnd', 'backend'],
    [{ backend: 'codec', Backend: 'cpu' }, 'Backend', 'backend'],
    [{ backend: 'codec', expectedElements: 2 ** 24 }, 'expectedElements', undefined],
    [{ backend: 'codec', webasmThread: true }, 'webasmThread', 'webasmThreads'],
    [{ backend: 'codec', webgpu: { uplod: 'write-buffer' } }, 'webgpu.uplod', 'webgpu.upload'],
    [{ backend: 'codec', webgpu: { checksumOnDevise: false } }, 'webgpu.checksumOnDevise', 'webgpu.checksumOnDevice'],
    [{ backend: 'codec', testFaults: { failstart: true } }, 'testFaults.failstart', 'testFaults.failStart'],
    [{ backend: 'codec', zzz: 1 }, 'zzz', undefined],
  ])('%o', async (options, argument, suggestion) => {
    await expect(createKernels(options as never)).rejects.toEqual(invalid(argument, suggestion));
  });

  it('the browser build checks them the same way', async () => {
    await expect(createBrowserKernels({ backnd: 'cpu' } as never)).rejects.toEqual(invalid('backnd', 'backend'));
    await expect(createBrowserKernels({ backend: 'codec', webgpu: { sliceElements: null } } as never)).rejects.toEqual(invalid('webgpu.sliceElements'));
  });

  it('known keys set to undefined are the defaults', async () => {
    const kernels = await createKernels({ backend: 'codec', expectedElementCount: undefined, webasmThreads: undefined, webgpu: undefined, testFaults: undefined });
    try {
      expect(kernels.backend).toBe('codec');
      const { values: decoded } = await kernels.decode(payload, undefined, { verify: undefined });
      expect(Array.from(decoded)).toEqual(Array.from(values));
    } finally {
      await kernels.dispose();
    }
  });
});

describe('createKernels: null, NaN, fractions and strings where a number, flag or name goes', () => {
  it.each([
    [{ backend: null }, 'backend'],
    [{ backend: 'atuo' }, 'backend', 'auto'],
    [{ backend: 'codec', expectedElementCount: null }, 'expectedElementCount'],
    [{ backend: 'codec', webgpu: { upload: null } }, 'webgpu.upload'],
    [{ backend: 'codec', webgpu: { upload: 'mapped-stagin' } }, 'webgpu.upload', 'mapped-staging'],
    [{ backend: 'codec', webgpu: { sliceElements: Number.NaN } }, 'webgpu.sliceElements'],
    [{ backend: 'codec', webgpu: { sliceElements: null } }, 'webgpu.sliceElements'],
    [{ backend: 'codec', webgpu: { sliceElements: 3000 } }, 'webgpu.sliceElements'],
    [{ backend: 'codec', webgpu: { maxBufferBytes: Number.NaN } }, 'webgpu.maxBufferBytes'],
    [{ backend: 'codec', webgpu: { maxWorkgroupsPerDimension: 0.5 } }, 'webgpu.maxWorkgroupsPerDimension'],
    [{ backend: 'codec', webgpu: { uploadPieceBytes: null } }, 'webgpu.uploadPieceBytes'],
    [{ backend: 'codec', webgpu: { checksumOnDeviceUnroll: null } }, 'webgpu.checksumOnDeviceUnroll'],
    [{ backend: 'codec', webgpu: { readbackPieceBytes: null } }, 'webgpu.readbackPieceBytes'],
    [{ backend: 'codec', webgpu: { readbackStagings: null } }, 'webgpu.readbackStagings'],
    [{ backend: 'codec', webgpu: { checksumOnDevice: 'false' } }, 'webgpu.checksumOnDevice'],
    [{ backend: 'codec', webgpu: { checksumWorker: 0 } }, 'webgpu.checksumWorker'],
    [{ backend: 'codec', webgpu: { drainStages: 'yes' } }, 'webgpu.drainStages'],
    [{ backend: 'codec', webgpu: { reuseBindGroups: null } }, 'webgpu.reuseBindGroups'],
    [{ backend: 'codec', webgpu: { checksumFollowsUpload: 1 } }, 'webgpu.checksumFollowsUpload'],
    [{ backend: 'codec', testFaults: null }, 'testFaults'],
    [{ backend: 'codec', testFaults: { failLaunches: 'yes' } }, 'testFaults.failLaunches'],
  ])('%o', async (options, argument, suggestion?: string) => {
    await expect(createKernels(options as never)).rejects.toEqual(invalid(argument, suggestion));
  });

  it('the message names the option and shows the value as given', async () => {
    await expect(createKernels({ backend: 'codec', expectedElementCount: '4' as never })).rejects.toThrow('expectedElementCount must be an integer >= 0, got string "4"');
    await expect(createKernels({ backend: 'codec', webgpu: { sliceElements: Number.NaN } })).rejects.toThrow('webgpu.sliceElements must be an integer in 1..2147483648, got NaN');
  });
});

describe('decode, decodeToDevice and encode: the call options are checked', () => {
  it.each(['codec', 'cpu'] as const)('%s: misspelt keys and verify given as a string are INVALID_ARGUMENT', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      await expect(kernels.decode(payload, undefined, { verfy: false } as never)).rejects.toEqual(invalid('verfy', 'verify'));
      await expect(kernels.decode(payload, undefined, { verify: 'false' } as never)).rejects.toEqual(invalid('verify'));
      await expect(kernels.decodeToDevice(payload, { Verify: false } as never)).rejects.toEqual(invalid('Verify', 'verify'));
      await expect(kernels.decodeToDevice(payload, { verify: 0 } as never)).rejects.toEqual(invalid('verify'));
      await expect(kernels.encode(values, codebook, { chunksize: 4096 } as never)).rejects.toEqual(invalid('chunksize', 'chunkSize'));
      // The instance still works, and still runs on the backend asked for (a caller's mistake is no fallback).
      const decoded = await kernels.decode(payload, undefined, { verify: false });
      expect(decoded.backend).toBe(backend);
      expect(Array.from(decoded.values)).toEqual(Array.from(values));
    } finally {
      await kernels.dispose();
    }
  });

  it.each(['codec', 'cpu'] as const)('%s: encode with chunkSize null is the codec\'s INVALID_ARGUMENT on every backend', async (backend) => {
    const kernels = await createKernels({ backend });
    try {
      const error = await kernels.encode(values, codebook, { chunkSize: null } as never).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isSplitZipError(error) && error.code === 'INVALID_ARGUMENT').toBe(true);
    } finally {
      await kernels.dispose();
    }
  });
});
