// The 'workers' backend's options were checked by the kernels only at its first decode (the pool was
// created then): `createWorkerPoolDecoder({ workerUrl: 'decode-worker.js' })` returned a backend, and
// a load through it served each cached tensor raw as `cache-failed`. They are checked at creation.
import { isKernelsError } from '@splitzip/kernels/worker-decoder';
import { describe, expect, it } from 'vitest';
import { createWorkerPoolDecoder } from '../src/create-kernels-decoder.js';

function refusal(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('createWorkerPoolDecoder options', () => {
  it.each([
    ['a bare relative workerUrl', { workerUrl: 'decode-worker.js' }, 'workerUrl'],
    ['an http: workerUrl', { workerUrl: new URL('https://example.com/decode-worker.js') }, 'workerUrl'],
    ['threads 0', { threads: 0 }, 'threads'],
  ])('refuses %s when it is created, naming the option', (_name, options, argument) => {
    const error = refusal(() => createWorkerPoolDecoder(options));
    expect(isKernelsError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument } });
  });

  it('refuses a misspelt option when it is created', () => {
    const error = refusal(() => createWorkerPoolDecoder({ thread: 2 } as never));
    expect(isKernelsError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((error as Error).message).toMatch(/thread/);
  });

  it('is named by its thread count, and closes twice quietly', async () => {
    const decoder = createWorkerPoolDecoder({ threads: 1 });
    expect(decoder.name).toBe('workers:1');
    expect(decoder.closed).toBe(false);
    await decoder.close!();
    await decoder.close!();
    expect(decoder.closed).toBe(true);
  });
});
