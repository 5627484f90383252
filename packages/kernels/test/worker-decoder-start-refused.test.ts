import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createWorkerDecoder } from '../src/node.js';
import type * as StartWorkerModule from '../src/start-worker.js';
import { modelLikeValues } from './fixtures.js';
import { firstMismatch } from './reference-decode.js';

// `new Worker` that throws as it is called (Node refuses the script, or cannot make a thread):
// it threw out of every parallel decode as an untyped TypeError, callerDecodes or not.
const refusal = vi.hoisted(() => ({ on: false }));
vi.mock('../src/start-worker.js', async (importOriginal) => {
  const real = await importOriginal<typeof StartWorkerModule>();
  return {
    ...real,
    startWorker: (...args: Parameters<typeof real.startWorker>) => {
      if (refusal.on) throw Object.assign(new TypeError('injected: the worker could not start'), { code: 'ERR_WORKER_INIT_FAILED' });
      return real.startWorker(...args);
    },
  };
});

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const values = modelLikeValues((1 << 20) + 5, 7);
const source = codecEncode(values, calibrateCodebook(values).codebook);
const payload = new Uint8Array(new SharedArrayBuffer(source.length));
payload.set(source);

afterEach(() => {
  refusal.on = false;
});

describe('worker decoder: a worker whose start throws is a death', () => {
  it('with callerDecodes the calling thread decodes alone, the death counted with its reason', async () => {
    refusal.on = true;
    const d = createWorkerDecoder({ threads: 2, workerUrl, minParallelElements: 0 });
    try {
      expect(firstMismatch(await d.decode(payload), values)).toBe(-1);
      expect(d.workerDeaths).toBe(2);
      expect(d.lastWorkerFailure).toBe('injected: the worker could not start');
    } finally {
      await d.dispose();
    }
  });

  it('with callerDecodes: false a decode, and verifyChecksum, reject WORKER_FAILED with the reason in details; once starts work again, so do they', async () => {
    refusal.on = true;
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 0, callerDecodes: false });
    try {
      const failed = expect.objectContaining({
        name: 'KernelsError',
        code: 'WORKER_FAILED',
        message: expect.stringContaining('injected: the worker could not start'),
        details: expect.objectContaining({ reason: 'injected: the worker could not start' }),
      });
      await expect(d.decode(payload)).rejects.toEqual(failed);
      await expect(d.verifyChecksum(payload)).rejects.toEqual(failed);
      expect(d.workerDeaths).toBe(2);
      refusal.on = false;
      expect(firstMismatch(await d.decode(payload), values)).toBe(-1);
      await d.verifyChecksum(payload);
    } finally {
      await d.dispose();
    }
  });
});
