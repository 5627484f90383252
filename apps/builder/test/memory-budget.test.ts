// The pieces that bound the build's memory: the slab every buffer in flight comes from, and the sizes reserved in it.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { calibrateFromHistogram, computePayloadLayout, countExponents, createCodebook, encode, getCodecBackend, setCodecBackend } from '@splitzip/codec';
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
    const slab = createSlabPool(4 * SLAB_ALIGN_BYTES, { threads: 1 });
    expect(slab.buffer).toBeInstanceOf(SharedArrayBuffer);
    // Offsets from the slab's start (in a codec arena the kernels' scratch areas come first).
    const at = (view: Uint8Array): number => view.byteOffset - slab.byteOffset;
    expect(slab.byteOffset % SLAB_ALIGN_BYTES).toBe(0);
    const [a, b] = slab.tryAcquire([10, SLAB_ALIGN_BYTES + 1])!;
    expect([at(a!), a!.length, at(b!), b!.length]).toEqual([0, 10, SLAB_ALIGN_BYTES, SLAB_ALIGN_BYTES + 1]);
    expect(a!.buffer).toBe(slab.buffer);
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    // Two more blocks do not fit (one does): nothing is taken.
    expect(slab.tryAcquire([1, 1])).toBeNull();
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    const [c] = slab.tryAcquire([SLAB_ALIGN_BYTES])!;
    expect(at(c!)).toBe(3 * SLAB_ALIGN_BYTES);
    // Freeing a and then b leaves one free range of three blocks (merged both ways).
    slab.release(a!);
    expect(slab.tryAcquire([3 * SLAB_ALIGN_BYTES])).toBeNull();
    slab.release(b!.subarray(0, 5)); // not the view handed out: ignored
    expect(slab.usedBytes).toBe(3 * SLAB_ALIGN_BYTES);
    slab.release(b!);
    const [d] = slab.tryAcquire([3 * SLAB_ALIGN_BYTES])!;
    expect(at(d!)).toBe(0);
    // A second release of b (now inside d's range, at the same offset as a was) frees nothing.
    slab.release(a!);
    slab.release(b!);
    expect(slab.usedBytes).toBe(4 * SLAB_ALIGN_BYTES);
    slab.release(d!);
    slab.release(c!);
    expect(slab.usedBytes).toBe(0);
    expect(slabBytesOf([10, SLAB_ALIGN_BYTES + 1])).toBe(3 * SLAB_ALIGN_BYTES);
  });

  it('is a codec arena shared with its workers, where the codec encodes in place with the same bytes', async () => {
    const slab = createSlabPool(8 << 20, { threads: 2, arena: true });
    expect(slab.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(slab.zeroCopy).toBe(getCodecBackend() === 'wasm-simd');
    // Each worker gets its own kernel scratch area of the same memory; no third one was reserved.
    const [first, second] = [slab.share(0), slab.share(1)];
    expect(first.buffer).toBe(slab.buffer);
    expect(first.scratchBase).not.toBe(second.scratchBase);
    expect(() => slab.share(2)).toThrow();
    // A worker attached to its share sees the bytes written here, and writes back in place.
    const [raw, out] = slab.tryAcquire([4096, worstPayloadBytes(2048, 0.99, 1024)])!;
    // 2048 BF16 values with two exponents and both signs (they pass the gate: encode writes a payload).
    new Uint16Array(raw!.buffer, raw!.byteOffset, 2048).set(Uint16Array.from({ length: 2048 }, (_, i) => ((i & 1) << 15) | (0x3f00 + ((i * 37) & 0xff))));
    const written = raw!.reduce((n, byte) => n + byte, 0);
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const { attachCodecArena } = require(workerData.codec);
       const buffer = attachCodecArena(workerData.share).buffer;
       const view = new Uint8Array(buffer, workerData.at, 4096);
       let sum = 0; for (const byte of view) sum += byte;
       view[0] = 201;
       parentPort.postMessage(sum);`,
      { eval: true, workerData: { share: first, at: raw!.byteOffset, codec: createRequire(import.meta.url).resolve('@splitzip/codec') } },
    );
    const sum = await new Promise((resolve, reject) => worker.once('message', resolve).once('error', reject));
    await worker.terminate();
    expect(sum).toBe(written);
    expect(raw![0]).toBe(201);
    // Encoding a view of the slab into another (in place in an arena) writes what a plain encode does.
    const values = new Uint16Array(raw!.buffer, raw!.byteOffset, 2048);
    const book = createCodebook(calibrateFromHistogram(countExponents(values)).codebook.exponents);
    expect(encode(values, book, { out: out! })).toEqual(encode(values.slice(), book));
  });

  it('is a plain shared buffer when asked (the default where malloc gives huge pages), which an arena would not get', () => {
    const slab = createSlabPool(1 << 20, { threads: 2, arena: false });
    expect([slab.zeroCopy, slab.byteOffset, slab.buffer instanceof SharedArrayBuffer]).toEqual([false, 0, true]);
    expect(slab.share(0)).toEqual({ buffer: slab.buffer, memory: null, scratchBase: 0 });
  });

  it('falls back to a plain shared buffer where the codec cannot work in place', () => {
    setCodecBackend('js');
    try {
      const slab = createSlabPool(1 << 20, { threads: 2 });
      expect(slab.zeroCopy).toBe(false);
      expect(slab.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(slab.byteOffset).toBe(0);
      expect(slab.share(1).buffer).toBe(slab.buffer);
      expect(() => slab.share(2)).toThrow(RangeError);
      expect(createSlabPool(1 << 20).buffer).toBeInstanceOf(ArrayBuffer);
    } finally {
      setCodecBackend('auto');
    }
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
