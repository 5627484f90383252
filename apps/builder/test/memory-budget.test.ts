// The pieces that bound the build's memory: the slab every buffer in flight comes from, and the sizes reserved in it.
import { computePayloadLayout } from '@splitzip/codec';
import { describe, expect, it } from 'vitest';
import { inFlightBytesOf } from '../src/build-cache.js';
import { createSlabPool, SLAB_ALIGN_BYTES, slabBytesOf } from '../src/create-slab-pool.js';
import { worstPayloadBytes } from '../src/tensor-tasks.js';

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


describe('worstPayloadBytes', () => {
  it('holds the payload of any tensor that passes the gate, and not much more', () => {
    for (const values of [1, 1023, 1024, 4096 * 4096 + 7]) {
      for (const coverageMin of [0.99, 0.5]) {
        const worst = computePayloadLayout(values, Math.floor(values * (1 - coverageMin)), 1024).totalBytes;
        expect(worstPayloadBytes(values, coverageMin, 1024)).toBeGreaterThanOrEqual(worst);
        // At most one escape more than the exact worst case (the share is rounded up).
        const oneMore = computePayloadLayout(values, Math.floor(values * (1 - coverageMin)) + 1, 1024).totalBytes;
        expect(worstPayloadBytes(values, coverageMin, 1024)).toBeLessThanOrEqual(oneMore);
      }
    }
  });
});

describe('createSlabPool', () => {
  it('hands out aligned views of one shared buffer, all or nothing, and merges freed neighbours', () => {
    const slab = createSlabPool(4 * SLAB_ALIGN_BYTES);
    expect(slab.buffer).toBeInstanceOf(SharedArrayBuffer);
    const [a, b] = slab.tryAcquire([10, SLAB_ALIGN_BYTES + 1])!;
    expect([a!.byteOffset, a!.length, b!.byteOffset, b!.length]).toEqual([0, 10, SLAB_ALIGN_BYTES, SLAB_ALIGN_BYTES + 1]);
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    // Two more blocks do not fit (one does): nothing is taken.
    expect(slab.tryAcquire([1, 1])).toBeNull();
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    const [c] = slab.tryAcquire([SLAB_ALIGN_BYTES])!;
    expect(c!.byteOffset).toBe(3 * SLAB_ALIGN_BYTES);
    // Freeing a and then b leaves one free range of three blocks (merged both ways).
    slab.release(a!);
    expect(slab.tryAcquire([3 * SLAB_ALIGN_BYTES])).toBeNull();
    slab.release(b!.subarray(0, 5)); // not the view handed out: ignored
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    slab.release(b!);
    const [d] = slab.tryAcquire([3 * SLAB_ALIGN_BYTES])!;
    expect(d!.byteOffset).toBe(0);
    // A second release of b (now inside d's range, at the same offset as a was) frees nothing.
    slab.release(a!);
    slab.release(b!);
    expect(slab.usedBytes).toBe(4 * SLAB_ALIGN_BYTES);
    slab.release(d!);
    slab.release(c!);
    expect(slab.usedBytes).toBe(0);
    expect(slabBytesOf([10, SLAB_ALIGN_BYTES + 1])).toBe(3 * SLAB_ALIGN_BYTES);
  });

  it('wakes a waiter when memory comes back, and remembers a release nobody waited for', async () => {
    const slab = createSlabPool(SLAB_ALIGN_BYTES);
    const [a] = slab.tryAcquire([SLAB_ALIGN_BYTES])!;
    let woke = false;
    const waiting = slab.changed().then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    slab.release(a!);
    await waiting;
    expect(woke).toBe(true);
    slab.release(slab.tryAcquire([1])![0]!);
    await slab.changed();
  });
});
