import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createReadWindow } from '../src/create-read-window.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import type { ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createReadWindow', () => {
  it('grants reads in request order while the bytes in flight fit', async () => {
    const window = createReadWindow(100);
    const granted: string[] = [];
    const releaseA = await window.acquire(60);
    const b = window.acquire(50).then((release) => (granted.push('b'), release));
    const c = window.acquire(10).then((release) => (granted.push('c'), release)); // fits, but b is ahead
    await tick();
    expect(granted).toEqual([]);
    expect(window.inFlightBytes).toBe(60);
    releaseA();
    const releaseB = await b;
    const releaseC = await c;
    expect(granted).toEqual(['b', 'c']);
    expect(window.inFlightBytes).toBe(60);
    releaseB();
    releaseB(); // idempotent
    expect(window.inFlightBytes).toBe(10);
    releaseC();
    expect(window.inFlightBytes).toBe(0);
  });

  it('lets a read larger than the window run alone', async () => {
    const window = createReadWindow(100);
    const releaseBig = await window.acquire(1000);
    let smallGranted = false;
    const small = window.acquire(1).then((release) => ((smallGranted = true), release));
    await tick();
    expect(smallGranted).toBe(false);
    releaseBig();
    (await small)();
    expect(smallGranted).toBe(true);
    const releaseAgain = await window.acquire(1000); // an empty window admits it at once
    releaseAgain();
  });

  it('an aborted waiter leaves the queue with a typed error and the reads behind it go on', async () => {
    const window = createReadWindow(100);
    const releaseA = await window.acquire(100);
    const controller = new AbortController();
    const aborted = window.acquire(100, controller.signal);
    const behind = window.acquire(50);
    controller.abort(new Error('stop'));
    await expect(aborted).rejects.toMatchObject({ code: 'ABORTED' });
    releaseA();
    (await behind)();
    expect(window.inFlightBytes).toBe(0);
    await expect(window.acquire(1, controller.signal)).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('tryAcquire grants at once only when no read waits ahead and the bytes fit', async () => {
    const window = createReadWindow(100);
    const releaseA = window.tryAcquire(60);
    expect(releaseA).toBeTypeOf('function');
    expect(window.tryAcquire(50)).toBeUndefined(); // no room
    const queued = window.acquire(50);
    expect(window.tryAcquire(10)).toBeUndefined(); // it fits, but a read waits ahead of it
    releaseA!();
    const releaseQueued = await queued;
    const releaseSmall = window.tryAcquire(10);
    expect(window.inFlightBytes).toBe(60);
    releaseQueued();
    releaseSmall!();
    expect(window.inFlightBytes).toBe(0);
    const releaseBig = window.tryAcquire(1000); // an empty window admits a read of any size
    expect(window.inFlightBytes).toBe(1000);
    releaseBig!();
  });

  it('rejects a window that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => createReadWindow(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });
});

describe('loadModel with a read window', () => {
  let fixture: CachedModelFixture;
  let model: SafetensorsModel;
  let cache: ShardCache;
  let raw: Map<string, Uint8Array>;

  beforeAll(async () => {
    fixture = await openCachedModel('read-window');
    ({ model, cache, raw } = fixture);
  });
  afterAll(async () => {
    await fixture?.close();
  });

  /** A file reader that records the most bytes and reads in flight at once. */
  function trackingReader(): ByteReader & { peakBytes: number; peakReads: number; largest: number } {
    const inner = createFileReader();
    let bytes = 0;
    let reads = 0;
    const state = {
      peakBytes: 0,
      peakReads: 0,
      largest: 0,
      async readExact(path: string, target: Uint8Array, positionBytes: number) {
        bytes += target.byteLength;
        reads += 1;
        state.peakBytes = Math.max(state.peakBytes, bytes);
        state.peakReads = Math.max(state.peakReads, reads);
        state.largest = Math.max(state.largest, target.byteLength);
        try {
          await tick(); // hold the read open across a turn so that overlapping reads would show
          await inner.readExact(path, target, positionBytes);
        } finally {
          bytes -= target.byteLength;
          reads -= 1;
        }
      },
      close: () => inner.close(),
    };
    return state;
  }

  for (const windowBytes of [1, 64 * 1024, Infinity]) {
    it(`keeps the bytes in flight within ${windowBytes} bytes and serves every tensor bit-exact`, async () => {
      const reader = trackingReader();
      const load = loadModel(model, cache, { reader, concurrency: 6, readWindowBytes: windowBytes });
      for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
      await reader.close();
      if (windowBytes === 1) {
        expect(reader.peakReads).toBe(1);
      } else if (windowBytes === Infinity) {
        expect(reader.peakReads).toBeGreaterThan(1);
      } else {
        expect(reader.peakBytes).toBeLessThanOrEqual(Math.max(windowBytes, reader.largest));
        expect(reader.peakReads).toBeGreaterThan(1);
      }
    });
  }

  it('takes a staging slot only once its read may start: reads queued for the window hold none', async () => {
    // Every cached payload goes through the pool (slots as large as the largest payload).
    let largest = 0;
    for (const t of model.tensors) largest = Math.max(largest, cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.compBytes ?? 0);
    const pool = createStagingPool({ slotBytes: largest, slotCount: 6 });
    const inner = createFileReader();
    let blobReads = 0;
    let peakInUseDuringRead = 0;
    const reader: ByteReader = {
      async readExact(path, target, positionBytes) {
        if (path.endsWith('.bin')) {
          blobReads++;
          peakInUseDuringRead = Math.max(peakInUseDuringRead, pool.stats().inUse);
        }
        await tick();
        await inner.readExact(path, target, positionBytes);
      },
      close: () => inner.close(),
    };
    // One read at a time; six tensors in flight, each of whose payloads once sat in a slot waiting for the window.
    const load = loadModel(model, cache, { reader, pool, backend: 'cpu', concurrency: 6, readWindowBytes: 1 });
    for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
    await reader.close();
    expect(blobReads).toBeGreaterThan(2);
    // The slot of the read under way, and at most one payload still being decoded (the CPU backend decodes as soon as it is read).
    expect(peakInUseDuringRead).toBeLessThanOrEqual(2);
    expect(pool.stats().inUse).toBe(0);
  });

  it('refuses a window that is not a positive integer', () => {
    expect(() => loadModel(model, cache, { readWindowBytes: 0 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('a load asks for its reads in model order', () => {
  let fixture: CachedModelFixture;

  beforeAll(async () => {
    // A large cached tensor first, then many small uncached ones (F32): the default model's shape.
    const small = Array.from({ length: 24 }, (_, i) => ({ name: `norm.${i}`, dtype: 'F32' as const, shape: [16], data: new Uint8Array(64).fill(i) }));
    fixture = await openCachedModel('read-order', [{ name: 'embed', dtype: 'BF16', shape: [256, 257], data: bf16Weights(256 * 257, 11) }, ...small]);
  });
  afterAll(async () => {
    await fixture?.close();
  });

  it("the large cached tensor's blob read is asked first, not after the small tensors' reads", async () => {
    const inner = createFileReader();
    const asked: string[] = [];
    const reader: ByteReader = {
      async readExact(path, target, positionBytes) {
        asked.push(path);
        await inner.readExact(path, target, positionBytes);
      },
      close: () => inner.close(),
    };
    const load = loadModel(fixture.model, fixture.cache, { reader });
    for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
    await reader.close();
    expect(load.reports[0]).toMatchObject({ name: 'embed', source: 'cache' });
    expect(asked[0]).toMatch(/\.bin$/);
    expect(asked.filter((path) => !path.endsWith('.bin'))).toHaveLength(24);
  });
});
