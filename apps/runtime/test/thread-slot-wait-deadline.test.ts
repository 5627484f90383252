import { BroadcastChannel } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool, type StagingPool, type StagingSlot } from '../src/create-staging-pool.js';
import type { ReadDecodeRequest } from '../src/create-cpu-decoder.js';
import { createThreadDecoder, type ThreadDecoder } from '../src/create-thread-decoder.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

// The decode threads take one slot at a time for all the queued reads of a pool. When that take
// timed out (slotWaitMs), every read of the pool still queued failed with it, one queued just
// before too (until 2026-12-07): a read's deadline counts from its own enqueue.

let fixture: CachedModelFixture;
let many: CachedModelFixture;
const manyNames = Array.from({ length: 100 }, (_, k) => `m${k}`);
// Every tensor read and decoded on the worker (no inline bound).
const decoder = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
const twoThreads = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });

beforeAll(async () => {
  fixture = await openCachedModel('thread-slot-wait-deadline', tunedWeights(['a', 'b', 'x'], 71));
  many = await openCachedModel('thread-slot-wait-deadline-many', tunedWeights(manyNames, 5));
  await decoder.warmUp();
  await twoThreads.warmUp();
}, 120_000);
afterAll(async () => {
  await decoder.close();
  await twoThreads.close();
  await fixture?.close();
  await many?.close();
});

/** Holds the calling thread (and so every timer and worker answer) for `ms`. */
function blockThread(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A pool of one slot, held by another caller, whose acquires the test can count. */
function busyPool(slotWaitMs: number): { pool: StagingPool; held: StagingSlot; asked: () => number; waits: (number | undefined)[] } {
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 1, slotWaitMs });
  const held = pool.tryAcquire() as StagingSlot;
  let asked = 0;
  const waits: (number | undefined)[] = [];
  const acquire = pool.acquire.bind(pool);
  pool.acquire = (options) => {
    asked += 1;
    waits.push(options?.slotWaitMs);
    return acquire(options);
  };
  return { pool, held, asked: () => asked, waits };
}

/** Resolves once `check()` holds (a hang guard of ~5 s, then the test goes on and fails). */
async function until(check: () => boolean): Promise<void> {
  for (let k = 0; k < 1000 && !check(); k++) await sleep(5);
}

const settled = (promise: Promise<unknown>) => promise.then((value) => ({ value }), (error: unknown) => ({ error }));

/** Decode threads that never answer a read (helpers/hung-decode-thread.mjs); one holding a read exits on `exitHungThread()`. */
const HUNG_THREAD_URL = new URL('./helpers/hung-decode-thread.mjs', import.meta.url);
const hungThreads = () => createThreadDecoder({ threads: 2, readJobsPerWorker: 1, inlineMaxValues: 0, startupInlineMaxValues: 0, workerUrl: HUNG_THREAD_URL });
function exitHungThread(): void {
  const channel = new BroadcastChannel('splitzip-test-hung-thread-exit');
  channel.postMessage('exit');
  channel.close();
}

/** The promise's outcome, or 'still waiting' after `ms` (a hang guard). */
const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> => Promise.race([promise, sleep(ms).then(() => 'still waiting' as const)]);

/** A pool of one free slot, whose acquires (the threads' takes once the slot is taken) the test can count. */
function countedPool(slotWaitMs: number): { pool: StagingPool; asked: () => number } {
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 2, slotWaitMs });
  let asked = 0;
  const acquire = pool.acquire.bind(pool);
  pool.acquire = (options) => {
    asked += 1;
    return acquire(options);
  };
  return { pool, asked: () => asked };
}

describe("a thread decoder's reads on a pool with slotWaitMs", () => {
  it('the first read times out; a later one, queued before that, is served by the slot that comes back in its own time', { timeout: 20_000 }, async () => {
    const { pool, held, asked } = busyPool(1000);
    try {
      const first = settled(loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend: decoder }));
      await until(() => asked() > 0);
      await sleep(500);
      const second = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend: decoder });
      const secondSettled = settled(second);
      expect(await first).toMatchObject({ error: { code: 'POOL_WAIT_TIMEOUT', retryable: true } });
      // The slot comes back about 500 ms before the second read's deadline.
      pool.release(held);
      const outcome = await secondSettled;
      expect(outcome).not.toHaveProperty('error');
      const tensor = await second;
      expect(sameBytes(tensor.data, fixture.raw.get('b.weight')!)).toBe(true);
    } finally {
      pool.close();
    }
  });

  it('with no slot back, the later read fails only once it has waited slotWaitMs itself', { timeout: 20_000 }, async () => {
    const { pool, asked, waits } = busyPool(300);
    try {
      const first = settled(loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend: decoder }));
      await until(() => asked() > 0);
      await sleep(150);
      const secondAt = performance.now();
      const second = settled(loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend: decoder }));
      const order: string[] = [];
      void first.then(() => order.push('first'));
      void second.then(() => order.push('second'));
      expect(await first).toMatchObject({ error: { code: 'POOL_WAIT_TIMEOUT' } });
      const secondError = (await second) as { error: Error & { details: { waitedMs: number } } };
      expect(secondError).toMatchObject({ error: { code: 'POOL_WAIT_TIMEOUT', retryable: true, details: { slotWaitMs: 300 } } });
      // Its take asked the pool for what it had left of the 300 ms (the loader's staging passes
      // it on), and its error tells its own wait, in the message as in the details.
      expect(waits[0]).toBeUndefined();
      expect(waits).toHaveLength(2);
      expect(waits[1]).toBeGreaterThan(0);
      expect(waits[1]).toBeLessThanOrEqual(300);
      expect(secondError.error.message).toMatch(/^no staging slot came within slotWaitMs \(300 ms\): 1 of 1 slots in use/);
      expect(secondError.error.details.waitedMs).toBeGreaterThanOrEqual(298);
      // A lower bound only (it was queued after secondAt): it waited its own slotWaitMs, not the
      // first read's take's (about 150 ms; a timer may fire a millisecond early on the loop's clock).
      expect(performance.now() - secondAt).toBeGreaterThanOrEqual(298);
      expect(order).toEqual(['first', 'second']);
      // Its take was given what it had left: no wait is left in the pool.
      expect(pool.stats()).toMatchObject({ inUse: 1, waits: 0 });
    } finally {
      pool.close();
    }
  });

  it("a pool only this decoder uses, fewer slots than threads: a worker holds its one slot and serves its reads, and the other worker's timed-out take fails none", { timeout: 60_000 }, async () => {
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 2, slotWaitMs: 20 });
    let asked = 0;
    const acquire = pool.acquire.bind(pool);
    pool.acquire = (options) => {
      asked += 1;
      const slot = acquire(options);
      // The idle worker's take (the busy one holds the slot): the calling thread held past its
      // deadline, so it times out while reads of the pool are still queued.
      if (asked === 1) blockThread(60);
      return slot;
    };
    try {
      const results = await Promise.allSettled(manyNames.map((n) => loadTensor({ model: many.model, name: `${n}.weight` }, { cache: many.cache, pool, backend: twoThreads })));
      const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(asked).toBeGreaterThan(0);
      expect(failed.map((r) => (r.reason as { code?: string }).code)).toEqual([]);
      expect(sameBytes((results[7] as PromiseFulfilledResult<{ data: Uint8Array }>).value.data, many.raw.get('m7.weight')!)).toBe(true);
    } finally {
      pool.close();
    }
  });

  it('the time a read waited for a busy worker is not slot wait: its take waits the whole slotWaitMs', { timeout: 20_000 }, async () => {
    const { pool, held, asked, waits } = busyPool(100);
    const other = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 1 });
    try {
      // The pool's first timeout: from now on the decoder knows its slotWaitMs.
      expect(await settled(loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend: decoder }))).toMatchObject({ error: { code: 'POOL_WAIT_TIMEOUT' } });
      // x (another pool) goes to the one worker, then b is queued behind it, and the calling
      // thread is held 150 ms: b waits that long for the worker (whose answer is not seen yet).
      let startX: (() => void) | undefined;
      const real = decoder.readDecode.bind(decoder);
      const backend = new Proxy(decoder, {
        get(target, key) {
          if (key !== 'readDecode') {
            const value = Reflect.get(target, key) as unknown;
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
          }
          return (request: ReadDecodeRequest) => {
            if (request.staging.source !== pool) {
              // x: held here until b's read comes.
              return new Promise((resolve, reject) => {
                startX = () => (real(request) as Promise<unknown>).then(resolve, reject);
              });
            }
            (startX as () => void)();
            const read = real(request);
            blockThread(150);
            return read;
          };
        },
      }) as ThreadDecoder;
      const x = settled(loadTensor({ model: fixture.model, name: 'x.weight' }, { cache: fixture.cache, pool: other, backend }));
      await until(() => startX !== undefined);
      const b = settled(loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend }));
      // b's take, once the worker is free: the slot comes back 40 ms into it.
      await until(() => asked() === 2);
      await sleep(40);
      pool.release(held);
      expect(await x).not.toHaveProperty('error');
      expect(await b).not.toHaveProperty('error');
      // Asked for the whole 100 ms (until 2026-12-07 ~1 ms: b's wait counted from its enqueue).
      expect(waits[1]).toBe(100);
    } finally {
      other.close();
      pool.close();
    }
  });

  it("reads that a pool's first timeout fails each get their own error: the pool's slotWaitMs, their own wait", { timeout: 20_000 }, async () => {
    const { pool } = busyPool(100);
    const other = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 1 });
    try {
      // x (another pool) goes to the one worker; a and b are queued behind it, a first, and the
      // calling thread is held 150 ms; then the threads' take for a times out with b still queued.
      const held: { request: ReadDecodeRequest; resolve: (value: unknown) => void; reject: (error: unknown) => void }[] = [];
      const real = decoder.readDecode.bind(decoder);
      const backend = new Proxy(decoder, {
        get(target, key) {
          if (key !== 'readDecode') {
            const value = Reflect.get(target, key) as unknown;
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
          }
          return (request: ReadDecodeRequest) => {
            const read = new Promise((resolve, reject) => held.push({ request, resolve, reject }));
            if (held.length === 3) {
              // x first (its pool is not `pool`), then a and b in the order they came.
              held.sort((p, q) => Number(p.request.staging.source === pool) - Number(q.request.staging.source === pool));
              for (const h of held) (real(h.request) as Promise<unknown>).then(h.resolve, h.reject);
              blockThread(150);
            }
            return read;
          };
        },
      }) as ThreadDecoder;
      const x = settled(loadTensor({ model: fixture.model, name: 'x.weight' }, { cache: fixture.cache, pool: other, backend }));
      const a = settled(loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend }));
      const b = settled(loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend }));
      expect(await x).not.toHaveProperty('error');
      const errors = [await a, await b].map((outcome) => (outcome as { error: Error & { code: string; details: { slotWaitMs: number; waitedMs: number } } }).error);
      for (const error of errors) {
        expect(error).toMatchObject({ code: 'POOL_WAIT_TIMEOUT', details: { slotWaitMs: 100 } });
        // The wait counted (from the take's start: both were queued before it) reached slotWaitMs.
        expect(error.details.waitedMs).toBeGreaterThanOrEqual(98);
      }
      // One error each (until 2026-12-07 b was failed with a's, the same object).
      expect(errors[0]).not.toBe(errors[1]);
    } finally {
      other.close();
      pool.close();
    }
  });
  it('a worker whose read of the pool never returns holds its one slot: the reads queued behind it fail POOL_WAIT_TIMEOUT once they have waited slotWaitMs', { timeout: 20_000 }, async () => {
    const hung = hungThreads();
    await hung.warmUp();
    const { pool, asked } = countedPool(50);
    const abort = new AbortController();
    const load = (name: string) => settled(loadTensor({ model: fixture.model, name }, { cache: fixture.cache, pool, backend: hung, signal: abort.signal }));
    // a: a worker takes the pool's one slot for it, and never answers.
    const a = load('a.weight');
    try {
      await until(() => pool.stats().inUse === 1);
      const b = load('b.weight');
      const x = load('x.weight');
      await until(() => asked() > 0);
      // Until 2026-12-07 (8bd248a) every take timed out harmlessly, the worker holding the slot
      // counted as serving the pool's reads: b and x waited for ever.
      const outcomes = await within(Promise.all([b, x]), 5000);
      expect(outcomes).toMatchObject([{ error: { code: 'POOL_WAIT_TIMEOUT', retryable: true, details: { slotWaitMs: 50 } } }, { error: { code: 'POOL_WAIT_TIMEOUT', details: { slotWaitMs: 50 } } }]);
      for (const outcome of outcomes as { error: { details: { waitedMs: number } } }[]) expect(outcome.error.details.waitedMs).toBeGreaterThanOrEqual(48);
    } finally {
      abort.abort();
      await hung.close();
      pool.close();
      await a;
    }
  });

  it("a take begun while a worker held the pool's slot, which it then let go of (the worker died) to another user of the pool: the reads' wait counts on, and the take's timeout fails them", { timeout: 20_000 }, async () => {
    const hung = hungThreads();
    await hung.warmUp();
    const { pool, asked } = countedPool(200);
    const abort = new AbortController();
    const load = (name: string) => settled(loadTensor({ model: fixture.model, name }, { cache: fixture.cache, pool, backend: hung, signal: abort.signal }));
    const a = load('a.weight');
    let other: StagingSlot | undefined;
    try {
      await until(() => pool.stats().inUse === 1);
      // Another user of the pool, waiting ahead of the threads' take: it gets the slot the worker lets go of.
      const otherWait = pool.acquire({ slotWaitMs: 10_000 }).then((slot) => (other = slot));
      let askedWhenFailed: number | undefined;
      const b = load('b.weight').then((outcome) => {
        askedWhenFailed = asked();
        return outcome;
      });
      await until(() => asked() === 2);
      exitHungThread();
      await otherWait;
      const outcome = await within(b, 5000);
      expect(outcome).toMatchObject({ error: { code: 'POOL_WAIT_TIMEOUT', details: { slotWaitMs: 200 } } });
      expect((outcome as { error: { details: { waitedMs: number } } }).error.details.waitedMs).toBeGreaterThanOrEqual(198);
      // Failed by the take that began while the worker held the slot (the other user's acquire is
      // the first ask). Until 2026-12-07 (8bd248a) that take's timeout failed nothing, the holder
      // counted as when it began, and b waited the whole slotWaitMs again in a second take.
      expect(askedWhenFailed).toBe(2);
    } finally {
      abort.abort();
      await hung.close();
      if (other !== undefined) pool.release(other);
      pool.close();
      await a;
    }
  });
});
