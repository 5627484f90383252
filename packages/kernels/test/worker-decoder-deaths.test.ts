import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { createWorkerDecoder, type WorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';
import { firstMismatch } from './reference-decode.js';

const values = modelLikeValues((1 << 20) + 5, 43);
const source = codecEncode(values, calibrateCodebook(values).codebook);
const payload = new Uint8Array(new SharedArrayBuffer(source.length));
payload.set(source);

/** Long enough for a worker thread to start and fail on this loaded 2-core VM (~20-50 ms measured). */
const WORKER_FAIL_MS = 1500;

/** Blocks this thread (no event-loop turn), so a worker's death arrives but is not yet delivered. */
function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

async function settle(decoder: WorkerDecoder, deaths: number): Promise<void> {
  for (let i = 0; i < 100 && decoder.workerDeaths < deaths; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  // Any second event of the same death (the 'exit' after an 'error') has come by now too.
  await new Promise((resolve) => setTimeout(resolve, 100));
}

// A worker whose script cannot load or throws emits 'error' and then 'exit': it counted as two
// deaths, and lastWorkerFailure said "exit code 1" instead of why.
describe('workerDeaths and lastWorkerFailure', () => {
  const cases = [
    // (A script that cannot be found is refused when the decoder is made: worker-decoder-args.)
    { name: 'a script that throws on load', url: new URL('./workers/throwing-worker.mjs', import.meta.url), reason: /^worker script threw on load$/ },
  ];
  for (const { name, url, reason } of cases) {
    it(`count one death per worker, with its reason: ${name}`, async () => {
      const decoder = createWorkerDecoder({ threads: 2, minParallelElements: 0, workerUrl: url });
      try {
        expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
        await settle(decoder, 2);
        expect(decoder.workerDeaths).toBe(2);
        expect(decoder.lastWorkerFailure).toMatch(reason);
      } finally {
        await decoder.dispose();
      }
    });
  }

  it('a worker that exits is one death, its exit code the reason', async () => {
    const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 0, workerUrl: new URL('./workers/exiting-worker.mjs', import.meta.url) });
    try {
      await decoder.decode(payload);
      await settle(decoder, 1);
      expect(decoder.workerDeaths).toBe(1);
      expect(decoder.lastWorkerFailure).toBe('exit code 3');
    } finally {
      await decoder.dispose();
    }
  });

  // A worker still loading when the calling thread had finished the decode alone: a healthy pool's
  // first call does not wait for its workers' start, so the death is counted when it arrives, once.
  const lateCases = [
    { name: 'throws as it loads', url: new URL('./workers/late-throwing-worker.mjs', import.meta.url), threads: 2, reason: 'worker script threw late on load' },
    { name: 'exits as it loads (killed during start-up)', url: new URL('./workers/late-exiting-worker.mjs', import.meta.url), threads: 1, reason: 'exit code 7' },
  ];
  for (const { name, url, threads, reason } of lateCases) {
    it(`a worker that ${name}, after the calling thread finished: counted once when it dies, with its reason`, async () => {
      const decoder = createWorkerDecoder({ threads, minParallelElements: 0, workerUrl: url });
      try {
        expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
        await settle(decoder, threads);
        expect(decoder.workerDeaths).toBe(threads);
        expect(decoder.lastWorkerFailure).toBe(reason);
      } finally {
        await decoder.dispose();
      }
    });
  }

  // The backoff stepped once per dead worker: 3 threads held 4 calls after the first round, then 32.
  for (const threads of [1, 3]) {
    it(`with callerDecodes, workers dead at start are replaced after 1, then 2, then 4 calls (${threads} threads): each call that starts them waits for them and counts their deaths`, async () => {
      const decoder = createWorkerDecoder({ threads, minParallelElements: 0, workerUrl: new URL('./workers/throwing-worker.mjs', import.meta.url) });
      try {
        const counts: number[] = [];
        for (let call = 0; call < 11; call++) {
          expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
          // The first call does not wait for the workers it started (no death seen yet): their deaths come after.
          if (call === 0) await settle(decoder, threads);
          counts.push(decoder.workerDeaths);
        }
        // Calls 1, 3, 6 and 11 start the workers, which die at start; the others decode alone.
        expect(counts).toEqual([1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 4].map((rounds) => rounds * threads));
      } finally {
        await decoder.dispose();
      }
    });
  }

  // The first round is not waited for (no death seen yet), so its deaths arrive across later calls:
  // the first set a hold, the next call spent it, and the round's other deaths, finding no hold,
  // stepped the backoff again (3 threads: replacements after 2, 4, 8 calls, not 1, 2, 4).
  it('the deaths of one round of starts step the backoff once, whenever they arrive', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const gate = await mkdtemp(join(tmpdir(), 'splitzip-gate-'));
    const before = process.env.SPLITZIP_TEST_GATE_DIR;
    process.env.SPLITZIP_TEST_GATE_DIR = gate;
    const release = (n: number) => writeFile(join(gate, `die-${n}`), '');
    const decoder = createWorkerDecoder({ threads: 3, minParallelElements: 0, workerUrl: new URL('./workers/gated-throwing-worker.mjs', import.meta.url) });
    try {
      expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1); // round 1: workers 0-2, not waited for
      await release(0);
      await settle(decoder, 1);
      expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1); // held: starts none
      await Promise.all([1, 2, 3, 4, 5].map(release)); // round 1's last deaths; round 2's workers die at once
      await settle(decoder, 3);
      expect(decoder.workerDeaths).toBe(3);
      expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1); // round 2, waited for
      expect(decoder.workerDeaths).toBe(6);
    } finally {
      await decoder.dispose();
      if (before === undefined) delete process.env.SPLITZIP_TEST_GATE_DIR;
      else process.env.SPLITZIP_TEST_GATE_DIR = before;
      await rm(gate, { recursive: true, force: true });
    }
  });

  it('with callerDecodes: false, every call starts its worker again and rejects WORKER_FAILED, its death counted', async () => {
    const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false, workerUrl: new URL('./workers/late-throwing-worker.mjs', import.meta.url) });
    try {
      for (let call = 1; call <= 3; call++) {
        await expect(decoder.decode(payload)).rejects.toMatchObject({
          code: 'WORKER_FAILED',
          message: expect.stringMatching(/worker script threw late on load/),
          details: { reason: expect.stringMatching(/worker script threw late on load/) },
        });
        expect(decoder.workerDeaths).toBe(call);
      }
    } finally {
      await decoder.dispose();
    }
  });

  // The calling thread decoded alone and back-to-back calls resolved before the event loop turned:
  // the counters stayed 0 however many decodes ran without a worker.
  it('a death that arrived during a decode the calling thread finished alone is counted when it resolves', async () => {
    const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 0, workerUrl: new URL('./workers/throwing-worker.mjs', import.meta.url) });
    try {
      await decoder.decode(payload);
      // The worker fails meanwhile; its 'error' event waits for this thread's event loop.
      blockFor(WORKER_FAIL_MS);
      const decoded = await decoder.decode(payload);
      expect(firstMismatch(decoded, values)).toBe(-1);
      expect(decoder.workerDeaths).toBe(1);
      expect(decoder.lastWorkerFailure).toMatch(/^worker script threw on load$/);
    } finally {
      await decoder.dispose();
    }
  });
});

// A bundle that inlined this package must pass the installed worker script; it had no export of
// its own (the probe went through package.json's path), so import.meta.resolve could not name it.
describe('the ./decode-worker subpath', () => {
  it('names the built worker script, and a decoder given it runs its workers', async () => {
    const resolved = new URL(import.meta.resolve('@splitzip/kernels/decode-worker'));
    expect(resolved.href).toBe(new URL('../dist/decode-worker.js', import.meta.url).href);
    const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false, workerUrl: resolved });
    try {
      expect(firstMismatch(await decoder.decode(payload), values)).toBe(-1);
      expect(decoder.workerDeaths).toBe(0);
    } finally {
      await decoder.dispose();
    }
  });
});
