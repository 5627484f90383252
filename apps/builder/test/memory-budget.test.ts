// The two pieces that bound the build's memory: the raw-buffer pool and the in-flight estimate.
import { computePayloadLayout } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { inFlightBytesOf } from '../src/build-cache.js';
import { createBufferPool, sizeClassOf, SIZE_CLASS_MIN_BYTES } from '../src/create-buffer-pool.js';
import { createInFlightBudget } from '../src/create-in-flight-budget.js';

describe('createBufferPool', () => {
  it('reuses the smallest idle buffer that fits and hands out exact-length views at offset 0', () => {
    const dropped: number[] = [];
    const pool = createBufferPool(1000, (n) => dropped.push(n));
    const a = pool.acquire(300);
    const b = pool.acquire(100);
    expect([a.byteOffset, a.length, b.length]).toEqual([0, 300, 100]);
    pool.release(a.buffer as ArrayBuffer);
    pool.release(b.buffer as ArrayBuffer);
    expect(pool.idleBytes).toBe(400);
    const c = pool.acquire(90);
    expect(c.buffer).toBe(b.buffer);
    expect(c.length).toBe(90);
    const d = pool.acquire(250);
    expect(d.buffer).toBe(a.buffer);
    expect(pool.idleBytes).toBe(0);
    expect(dropped).toEqual([]);
  });

  it('never keeps more than its cap alive: idle buffers are dropped (and reported) first', () => {
    const dropped: number[] = [];
    const pool = createBufferPool(1000, (n) => dropped.push(n));
    const a = pool.acquire(400);
    const b = pool.acquire(400);
    pool.release(a.buffer as ArrayBuffer);
    pool.release(b.buffer as ArrayBuffer);
    expect(pool.idleBytes).toBe(800);
    // 600 fits no idle buffer: allocating it would make 1400 alive, so one 400 goes.
    const c = pool.acquire(600);
    expect(dropped).toEqual([400]);
    expect(pool.idleBytes).toBe(400);
    // Releasing 600 while 400 idle + 0 out = 1000: it fits exactly; one more would not.
    pool.release(c.buffer as ArrayBuffer);
    expect(pool.idleBytes).toBe(1000);
    // 700 fits nothing idle; 1000 idle + 700 > cap: both idle buffers go, largest first.
    const e = pool.acquire(700);
    expect(e.length).toBe(700);
    expect(dropped).toEqual([400, 600, 400]);
    expect(pool.idleBytes).toBe(0);
    pool.release(e.buffer as ArrayBuffer);
    expect(pool.acquire(350).buffer).toBe(e.buffer);
  });
});

describe('inFlightBytesOf', () => {
  it('covers the raw bytes plus the largest payload a tensor passing the gate can have', () => {
    for (const values of [0, 1, 1023, 1024, 1025, 4096 * 4096 + 7]) {
      for (const coverageMin of [0.99, 0.9, 0.5]) {
        const worstEscapes = Math.floor(values * (1 - coverageMin));
        const payload = computePayloadLayout(values, worstEscapes, 1024).totalBytes;
        expect(inFlightBytesOf(values * 2, coverageMin, 1024)).toBeGreaterThanOrEqual(values * 2 + payload);
        // ... and not grossly more (it is a budget, not a guess): within 1% + 2 KiB.
        expect(inFlightBytesOf(values * 2, coverageMin, 1024)).toBeLessThanOrEqual((values * 2 + payload) * 1.01 + 2048);
      }
    }
  });
});

describe('sizeClassOf', () => {
  it('keeps small sizes exact and rounds larger ones up by at most 25 % to a few classes', () => {
    expect(sizeClassOf(1000)).toBe(1000);
    expect(sizeClassOf(SIZE_CLASS_MIN_BYTES)).toBe(SIZE_CLASS_MIN_BYTES);
    expect(sizeClassOf(2 ** 24)).toBe(2 ** 24);
    expect(sizeClassOf(2 ** 24 + 1)).toBe(1.25 * 2 ** 24);
    // A 16 MiB tensor's payload (~0.75 x) and a 12 MiB tensor share one class.
    expect(sizeClassOf(12_600_000)).toBe(sizeClassOf(12 * 2 ** 20 + 1));
    for (let size = SIZE_CLASS_MIN_BYTES + 1; size < 2 ** 31; size = Math.ceil(size * 1.37)) {
      const capacity = sizeClassOf(size);
      expect(capacity).toBeGreaterThanOrEqual(size);
      expect(capacity).toBeLessThanOrEqual(size * 1.25);
    }
  });

  it('shared pools hand out SharedArrayBuffers of the size class', () => {
    const pool = createBufferPool(2 ** 24, () => {}, { shared: true });
    const view = pool.acquire(SIZE_CLASS_MIN_BYTES * 3 + 5);
    expect(view.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(view.length).toBe(SIZE_CLASS_MIN_BYTES * 3 + 5);
    expect(view.buffer.byteLength).toBe(sizeClassOf(SIZE_CLASS_MIN_BYTES * 3 + 5));
  });
});

describe('createInFlightBudget', () => {
  it('admits one reservation whatever its size, then only what fits; gives bytes back in parts', async () => {
    const budget = createInFlightBudget(100);
    expect(budget.fits(500)).toBe(true);
    const a = budget.reserve(80);
    expect(budget.fits(30)).toBe(false);
    expect(budget.fits(20)).toBe(true);
    let woke = false;
    const waiting = budget.changed().then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    a.shrinkTo(50);
    await waiting;
    expect(budget.usedBytes).toBe(50);
    expect(budget.fits(30)).toBe(true);
    a.shrinkTo(70); // never grows
    expect(budget.usedBytes).toBe(50);
    a.release();
    a.release();
    expect(budget.usedBytes).toBe(0);
    // A give-back with nobody waiting is remembered for the next wait.
    budget.reserve(10).release();
    await budget.changed();
  });
});
