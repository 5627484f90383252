// The user probe (item 9): one call of the worker decoder could not be abandoned without dispose():
// verifyChecksum(sharedPayload, { gate }) with a gate never raised never settled, and
// decode(p, undefined, { signal }) was refused as an unknown option. Now `signal` rejects that call
// ABORTED (the signal's reason its cause), and the decoder goes on serving later calls.
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createWorkerDecoder, isKernelsError } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';
import { inShared } from './payload-helpers.js';
import { firstMismatch } from './reference-decode.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const silentWorkerUrl = new URL('./workers/silent-worker.mjs', import.meta.url);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// More than one 2^20-value checksum segment, so that the gate holds a v3 segment back.
const values = modelLikeValues(2 ** 21 + 3);
const payload = codecEncode(values, calibrateCodebook(values).codebook);
const shared = inShared(payload);

/** How a promise settled: 'resolved', its KernelsError code, or 'pending' after `ms`. */
async function outcomeOf(promise: Promise<unknown>, ms = 2000): Promise<string> {
  return Promise.race([
    promise.then(
      () => 'resolved',
      (error: unknown) => (isKernelsError(error) ? error.code : `other: ${String(error)}`),
    ),
    sleep(ms).then(() => 'pending'),
  ]);
}

describe('worker decoder: a per-call signal', () => {
  it('an already-aborted signal: ABORTED before anything starts, the reason as cause; decode and verifyChecksum', async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1 });
    try {
      const reason = new Error('caller gave up');
      const signal = AbortSignal.abort(reason);
      const out = new Uint16Array(new SharedArrayBuffer(2 * values.length));
      const error = await d.decode(shared, out, { signal }).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'KernelsError', code: 'ABORTED', details: { reason }, cause: reason });
      expect((error as Error).message).toContain('caller gave up');
      expect(out.every((v) => v === 0)).toBe(true);
      await expect(d.verifyChecksum(shared, { signal })).rejects.toMatchObject({ code: 'ABORTED' });
      expect(d.workerDeaths).toBe(0);
      expect(firstMismatch(await d.decode(payload, undefined, { signal: new AbortController().signal }), values)).toBe(-1);
    } finally {
      await d.dispose();
    }
  });

  it('abort while verifyChecksum waits on a gate never raised (the probe\'s w7): ABORTED, and the pool goes on', { timeout: 20_000 }, async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: 1 });
    try {
      const gate = new Int32Array(new SharedArrayBuffer(4));
      const controller = new AbortController();
      const verifying = d.verifyChecksum(shared, { gate, signal: controller.signal });
      // Queued behind it: abandoned before its turn, it rejects at once and never runs.
      const queuedController = new AbortController();
      const queuedOut = new Uint16Array(new SharedArrayBuffer(2 * values.length));
      const queued = d.decode(shared, queuedOut, { signal: queuedController.signal });
      await sleep(200);
      expect(await outcomeOf(verifying, 50)).toBe('pending');
      queuedController.abort();
      expect(await outcomeOf(queued)).toBe('ABORTED');
      expect(await outcomeOf(verifying, 50)).toBe('pending');
      controller.abort();
      expect(await outcomeOf(verifying)).toBe('ABORTED');
      // The abandoned job's workers gave up their wait: the decoder is idle again, and serves calls.
      expect(await outcomeOf(d.idle(), 5000)).toBe('resolved');
      expect(queuedOut.every((v) => v === 0)).toBe(true);
      expect(firstMismatch(await d.decode(shared), values)).toBe(-1);
      Atomics.store(gate, 0, 2 ** 30);
      await expect(d.verifyChecksum(shared, { gate })).resolves.toBeUndefined();
      expect(d.workerDeaths).toBe(0);
    } finally {
      await d.dispose();
    }
  });

  it('abort while a decode waits on a worker that never answers: ABORTED without dispose(); dispose() still settles', { timeout: 20_000 }, async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl: silentWorkerUrl, minParallelElements: 0, callerDecodes: false });
    const controller = new AbortController();
    // An ordinary `out`: only the calling thread copies into it, never after the rejection.
    const out = new Uint16Array(values.length);
    const decoding = d.decode(shared, out, { signal: controller.signal });
    await sleep(300);
    controller.abort();
    expect(await outcomeOf(decoding)).toBe('ABORTED');
    expect(out.every((v) => v === 0)).toBe(true);
    await d.dispose();
  });

  it('a signal that is no AbortSignal is INVALID_ARGUMENT naming it', async () => {
    const d = createWorkerDecoder({ threads: 1, workerUrl });
    try {
      await expect(d.decode(payload, undefined, { signal: 'x' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'signal' } });
      await expect(d.verifyChecksum(shared, { signal: {} as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'signal' } });
      await expect(d.decode(payload, undefined, { verify: 'no' as never, signal: new AbortController().signal })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'verify' } });
    } finally {
      await d.dispose();
    }
  });
});
