// What an abandoned (aborted) call of the worker decoder leaves behind, with a worker held in the
// middle of its job (workers/holding-worker.mjs) as a descheduled thread would be:
// - payload in the decoder's arena, ordinary `out`: the staged values were put at the top of that
//   arena, so a caller that got ABORTED, reset() the arena and allocated again had its new data
//   overwritten by the worker finishing its range (the reviewer's arena-race3: 523,414 bytes);
// - a format-v2 verified decode: the calling thread and the worker each still hashed the whole
//   payload for a job no one would take;
// - a signal-like object without removeEventListener was taken: the call hung, and an unhandled
//   TypeError came when it settled.
import { closeSync, existsSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as CodecModule from '@splitzip/codec';
import { calibrateCodebook, convertPayloadVersion, encode as codecEncode, readPayloadMeta } from '@splitzip/codec';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWorkerDecoder, isKernelsError } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';
import { inShared } from './payload-helpers.js';
import { firstMismatch } from './reference-decode.js';

// Calls of the whole-payload checksum on the calling thread (workers load the real codec).
const checksums = vi.hoisted(() => ({ calls: 0 }));
vi.mock('@splitzip/codec', async (importOriginal) => {
  const codec = await importOriginal<typeof CodecModule>();
  return {
    ...codec,
    verifyPayloadChecksum: (...args: Parameters<typeof codec.verifyPayloadChecksum>) => {
      checksums.calls++;
      return codec.verifyPayloadChecksum(...args);
    },
  };
});

const holdingWorkerUrl = new URL('./workers/holding-worker.mjs', import.meta.url);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const values = modelLikeValues(2 ** 21 + 3);
const payload = codecEncode(values, calibrateCodebook(values).codebook);
const n = values.length;

let dir = '';
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'splitzip-hold-'));
  // Workers start at the first call and take the environment of that moment.
  process.env.SPLITZIP_TEST_HOLD_DIR = dir;
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const touch = (name: string): void => closeSync(openSync(join(dir, name), 'w'));
async function waitForFile(name: string): Promise<void> {
  for (let waited = 0; !existsSync(join(dir, name)); waited += 5) {
    if (waited > 15_000) throw new Error(`the worker never reached ${name}`);
    await sleep(5);
  }
}
async function outcomeOf(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'resolved',
    (error: unknown) => (isKernelsError(error) ? error.code : `other: ${String(error)}`),
  );
}

describe('worker decoder: an abandoned call', () => {
  it('payload in the arena, ordinary out: after ABORTED, arena.reset() and new allocations are not written by the worker finishing its range', { timeout: 30_000 }, async () => {
    const d = createWorkerDecoder({ threads: 1, arenaBytes: 64 << 20, minParallelElements: 0, callerDecodes: false, workerUrl: holdingWorkerUrl });
    try {
      const arena = d.arena!;
      const p = d.allocatePayload(payload.length);
      p.set(payload);
      const out = new Uint16Array(n);
      const controller = new AbortController();
      const decoding = d.decode(p, out, { verify: false, signal: controller.signal });
      // The worker holds the first range it claimed: it decodes it only once released.
      await waitForFile('at-claim');
      controller.abort(new Error('caller gave up'));
      expect(await outcomeOf(decoding)).toBe('ABORTED');
      // The caller takes its arena back at once, as the rejection invites.
      arena.reset();
      d.allocatePayload(payload.length).set(payload);
      const mine = d.allocatePayload(2 * n + 4096);
      mine.fill(0xab);
      touch('release-claim');
      await d.idle();
      expect(mine.findIndex((byte) => byte !== 0xab)).toBe(-1);
      expect(out.every((v) => v === 0)).toBe(true);
      expect(d.workerDeaths).toBe(0);
      // Calls with a signal stage their arena side too: still right, both ways round.
      arena.reset();
      const q = d.allocatePayload(payload.length);
      q.set(payload);
      const signal = new AbortController().signal;
      expect(firstMismatch(await d.decode(q, new Uint16Array(n), { signal }), values)).toBe(-1);
      const into = d.allocateOutput(n);
      expect(await d.decode(payload, into, { signal })).toBe(into);
      expect(firstMismatch(into, values)).toBe(-1);
      expect(firstMismatch(await d.decode(q, new Uint16Array(n)), values)).toBe(-1);
    } finally {
      touch('release-claim');
      await d.dispose();
    }
  });

  it('format v2, verified: neither the calling thread nor the worker hashes the whole payload after ABORTED', { timeout: 30_000 }, async () => {
    const v2 = convertPayloadVersion(payload, 2);
    expect(readPayloadMeta(v2).version).toBe(2);
    const shared = inShared(v2);
    const d = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false, workerUrl: holdingWorkerUrl });
    try {
      const out = new Uint16Array(new SharedArrayBuffer(2 * n));
      const controller = new AbortController();
      checksums.calls = 0;
      const decoding = d.decode(shared, out, { signal: controller.signal });
      // The worker is about to take the checksum (the calling thread, callerDecodes false, does not).
      await waitForFile('at-verify');
      controller.abort();
      expect(await outcomeOf(decoding)).toBe('ABORTED');
      touch('release-verify');
      touch('release-claim');
      await d.idle();
      expect(checksums.calls).toBe(0);
      expect(existsSync(join(dir, 'judged'))).toBe(false);
      // The pool goes on: the next verified call is hashed (by the worker) and right.
      expect(firstMismatch(await d.decode(shared), values)).toBe(-1);
      expect(existsSync(join(dir, 'judged'))).toBe(true);
    } finally {
      touch('release-verify');
      touch('release-claim');
      await d.dispose();
    }
  });

  it('a signal-like object without removeEventListener (or addEventListener, or a boolean aborted) is INVALID_ARGUMENT', async () => {
    const d = createWorkerDecoder({ threads: 1 });
    try {
      const noop = (): void => undefined;
      for (const signal of [{ aborted: false, addEventListener: noop }, { aborted: false, removeEventListener: noop }, { aborted: 0, addEventListener: noop, removeEventListener: noop }]) {
        await expect(d.decode(payload, undefined, { signal: signal as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'signal' } });
        await expect(d.verifyChecksum(inShared(payload), { signal: signal as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { argument: 'signal' } });
      }
    } finally {
      await d.dispose();
    }
  });
});
