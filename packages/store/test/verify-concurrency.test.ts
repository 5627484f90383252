// verify checked one entry at a time, each waiting on several file-system round trips: half of a
// 23 s verify of 64k small entries was idle. It now checks a few at once (VERIFY_CONCURRENCY), its
// buffers bounded in bytes (VERIFY_IN_FLIGHT_BYTES), with the report, progress and abort of the
// one-at-a-time loop.
import { afterEach, expect, it, vi } from 'vitest';
import type { VerifyBackend } from '../src/blob-range-reader.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore, StoreError, type CacheEntry, type VerifyProgress } from '../src/index.js';
import { VERIFY_CONCURRENCY, VERIFY_IN_FLIGHT_BYTES } from '../src/limits.js';
import { verifyEntries } from '../src/verify-entries.js';
import { makeCache, makeTensor, removeTempDirs, toInput, makeTempDir } from './helpers.js';

afterEach(async () => {
  vi.restoreAllMocks();
  await removeTempDirs();
});

/** Resolves once `done()` holds, or after `ms` (so that a loop that never gets there fails its assertion instead of hanging). */
async function waitUntil(done: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!done() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** A few event-loop turns: reads that end in another order than they started. */
async function turns(count: number): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Entries with payloads: every third one's blob missing, every fifth one's damaged. */
async function entriesWithDamage(count: number) {
  const store = await openCacheStore(await makeTempDir(), { create: true });
  const tensors = Array.from({ length: count }, (_, i) => makeTensor([16, 3], 500 + i));
  await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`)));
  const entries = [...store.entries()];
  await store.close();
  const payloads = new Map(tensors.map((t) => [t.key, t.payload.slice()]));
  entries.forEach((entry, i) => {
    if (i % 3 === 1) payloads.delete(entry.key);
    else if (i % 5 === 2) {
      const payload = payloads.get(entry.key)!;
      payload[300] = payload[300]! ^ 1;
    }
  });
  return { entries, payloads };
}

/** Serves `payloads`; earlier entries' reads take longer, so reads end out of order. Counts reads in flight. */
function slowFirstBackend(entries: readonly CacheEntry[], payloads: ReadonlyMap<string, Uint8Array>, concurrency?: number) {
  const seen = { inFlight: 0, most: 0, started: 0, ended: 0 };
  const order = new Map(entries.map((entry, i) => [entry.key, i]));
  const backend: VerifyBackend = {
    verifyConcurrency: concurrency,
    readBlobInto: async (key, _blob, target) => {
      seen.started++;
      seen.most = Math.max(seen.most, ++seen.inFlight);
      try {
        await turns(3 * (entries.length - order.get(key)!));
        const payload = payloads.get(key);
        if (payload === undefined) throw new StoreError('BLOB_MISSING', 'no blob file', { entry: key });
        target.set(payload.subarray(0, target.length));
      } finally {
        seen.inFlight--;
        seen.ended++;
      }
    },
  };
  return { backend, seen };
}

it('store.verify has more than one blob read in flight on a cache of many entries', async () => {
  const { root } = await makeCache(24);
  const read = FsBackend.prototype.readBlobInto;
  let inFlight = 0;
  let most = 0;
  let calls = 0;
  vi.spyOn(FsBackend.prototype, 'readBlobInto').mockImplementation(async function (this: FsBackend, ...args) {
    calls++;
    most = Math.max(most, ++inFlight);
    try {
      // The first read waits for a second to start: one at a time, none does (and it goes on after 2 s).
      if (calls === 1) await waitUntil(() => inFlight > 1, 2000);
      return await read.apply(this, args);
    } finally {
      inFlight--;
    }
  });
  const store = await openCacheStore(root);
  try {
    const progress: number[] = [];
    const report = await store.verify({ decode: true, onProgress: (p) => progress.push(p.done) });
    expect(report).toMatchObject({ ok: true, checked: 24, passed: 24, decoded: 24, problems: [] });
    expect(progress).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    expect(calls).toBe(24);
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(VERIFY_CONCURRENCY);
  } finally {
    await store.close();
  }
});

it('reads ending out of order give the report and progress of checking one entry at a time', async () => {
  const { entries, payloads } = await entriesWithDamage(30);
  const events = (into: VerifyProgress[]) => ({ decode: true, onProgress: (p: VerifyProgress) => into.push(p) });
  const alone = slowFirstBackend(entries, payloads, 1);
  const aloneProgress: VerifyProgress[] = [];
  const one = await verifyEntries(alone.backend, entries, 7, events(aloneProgress));
  expect(alone.seen.most).toBe(1);
  const many = slowFirstBackend(entries, payloads);
  const manyProgress: VerifyProgress[] = [];
  const report = await verifyEntries(many.backend, entries, 7, events(manyProgress));
  expect(many.seen.most).toBe(VERIFY_CONCURRENCY);
  expect({ ...report, durationMs: 0 }).toEqual({ ...one, durationMs: 0 });
  const damaged = entries.flatMap((e, i) => (i % 3 === 1 ? [[e.qualname, 'BLOB_MISSING']] : i % 5 === 2 ? [[e.qualname, 'BLOB_CORRUPT']] : []));
  expect(report.problems.map((p) => [p.qualname, p.code])).toEqual(damaged);
  expect(manyProgress).toEqual(aloneProgress);
  expect(manyProgress.map((p) => p.key)).toEqual(entries.map((e) => e.key));
});

it('an abort found after an entry stops verify there, with no read left running, as one at a time', async () => {
  const { entries, payloads } = await entriesWithDamage(30);
  const { backend, seen } = slowFirstBackend(entries, payloads);
  const controller = new AbortController();
  const reason = new Error('stop');
  const progress: number[] = [];
  const verifying = verifyEntries(backend, entries, 0, {
    signal: controller.signal,
    onProgress: (p) => {
      progress.push(p.done);
      if (p.done === 3) controller.abort(reason);
    },
  });
  await expect(verifying).rejects.toBe(reason);
  expect(progress).toEqual([1, 2, 3]);
  expect(seen.ended).toBe(seen.started);
  // Aborted before it starts: nothing is read.
  const before = slowFirstBackend(entries, payloads);
  await expect(verifyEntries(before.backend, entries, 0, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  expect(before.seen.started).toBe(0);
});

it(`the blobs read at once hold at most VERIFY_IN_FLIGHT_BYTES, beside one larger blob read alone`, async () => {
  const { entries } = await entriesWithDamage(1);
  const MiB = 2 ** 20;
  // Entries claiming blobs of 10 MiB (three fit at once) and of 40 MiB (above the capacity), read whole.
  const big = entries[0]!;
  const fake = Array.from({ length: 24 }, (_, i): CacheEntry => ({ ...big, key: i.toString(16).padStart(40, '0'), compBytes: (i % 4 === 3 ? 40 : 10) * MiB }));
  let bytes = 0;
  let most = 0;
  let large = 0;
  let mostLarge = 0;
  let mostAtOnce = 0;
  let atOnce = 0;
  const backend: VerifyBackend = {
    readBlobInto: async (_key, _blob, target) => {
      const above = target.length > VERIFY_IN_FLIGHT_BYTES;
      if (above) mostLarge = Math.max(mostLarge, ++large);
      else {
        bytes += target.length;
        most = Math.max(most, bytes);
        mostAtOnce = Math.max(mostAtOnce, ++atOnce);
      }
      await turns(5);
      if (above) large--;
      else {
        bytes -= target.length;
        atOnce--;
      }
    },
  };
  const report = await verifyEntries(backend, fake, 0, { decode: true });
  // Zeros: no valid header, every blob is reported (and was read).
  expect(report.problems.map((p) => p.code)).toEqual(fake.map(() => 'BLOB_CORRUPT'));
  expect(report.bytesRead).toBe(fake.reduce((sum, e) => sum + e.compBytes, 0));
  expect(most).toBeLessThanOrEqual(VERIFY_IN_FLIGHT_BYTES);
  expect(mostLarge).toBe(1);
  expect(mostAtOnce).toBeGreaterThan(1);
});
