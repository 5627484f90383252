// A loader's own tests may use fake timers (vi.useFakeTimers) around a load. The turns a load
// gives the event loop (take-turn-if-due.ts) were scheduled with the global setImmediate, which
// fake timers replace: that immediate never ran, and every later load in the process hung.
import { closeSync, openSync, readSync } from 'node:fs';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type { ByteReader } from '../src/create-file-reader.js';
import { loadModel } from '../src/load-model.js';
import { openCachedModel, tunedWeights, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('fake-timers', tunedWeights(Array.from({ length: 16 }, (_, k) => `t${k}`), 300));
});
afterAll(async () => fixture.close());

/** Reads that settle at once and take milliseconds of CPU each: the load's turns fall due. */
const busySyncReader = (): ByteReader => ({
  readExact(path, target, positionBytes) {
    const fd = openSync(path, 'r');
    try {
      readSync(fd, target, 0, target.byteLength, positionBytes);
    } finally {
      closeSync(fd);
    }
    // CPU work counted, not timed: fake timers may fake the clock as well.
    let sum = 0;
    for (let i = 0; i < 3e6; i++) sum += i;
    return sum >= 0 ? Promise.resolve() : Promise.reject(new Error('unreachable'));
  },
  close: () => Promise.resolve(),
});

/** The promise's outcome, or 'timed out' after `ms` of real time. */
const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> =>
  Promise.race([promise, new Promise<'timed out'>((resolve) => setTimeout(() => resolve('timed out'), ms))]);

it('a load begun under fake timers finishes once real timers are back, and later loads are not held up', async () => {
  vi.useFakeTimers();
  let first: Promise<string>;
  try {
    first = loadModel(fixture.model, null, { reader: busySyncReader() })
      .drain()
      .then(() => 'ok');
    for (let i = 0; i < 200; i++) await Promise.resolve();
  } finally {
    vi.useRealTimers();
  }
  expect(await within(first, 10_000)).toBe('ok');
  expect(await within(loadModel(fixture.model, fixture.cache, { backend: 'cpu' }).drain().then(() => 'ok'), 10_000)).toBe('ok');
  expect(await within(loadModel(fixture.model, null, { reader: busySyncReader() }).drain().then(() => 'ok'), 10_000)).toBe('ok');
}, 60_000);
