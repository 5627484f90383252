// A load aborted while its tensor is with the 'workers' backend (createWorkerPoolDecoder): the load's
// signal reaches the worker decoder, whose call then rejects at once, and the load rejects with the
// runtime's ABORTED. Its workers may still read the payload in place (a shared staging slot) until
// the decoder is idle: the slot stays out of the pool until then, and the next load that takes it
// gets its own bytes exactly. Until 2026-12-07 the signal never reached the decoder: the aborted
// load waited for the whole decode.
import { isKernelsError } from '@splitzip/kernels/worker-decoder';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createWorkerPoolDecoder } from '../src/create-kernels-decoder.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { markSettlingBackend } from '../src/settling-backends.js';
import { bf16Weights, openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

/** 64 chunks of 1,024 values: a job of several ranges on the workers. */
const BIG_VALUES = 65_536;

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('worker-pool-abort', [
    { name: 'big.weight', dtype: 'BF16', shape: [64, 1024], data: bf16Weights(BIG_VALUES, 71) },
    { name: 'next.weight', dtype: 'BF16', shape: [64, 1024], data: bf16Weights(BIG_VALUES, 72) },
  ]);
});
afterAll(async () => {
  await fixture.close();
});

interface DecodeCall {
  signal: AbortSignal | undefined;
  abandonedCalls: number;
  error: unknown;
}

/**
 * The worker-pool backend seen from outside: each decode's options recorded, `onDecode` run right
 * after the call was handed to the workers, and a promise given to `onAbandoned` held until `hold`
 * settles too. Marked as the runtime's own (settling) backend, as the one it wraps is: the load
 * takes the same path.
 */
function spyOnWorkerPool(onDecode: () => void, hold: Promise<void> = Promise.resolve()) {
  const inner = createWorkerPoolDecoder({ threads: 1, minParallelElements: 0 });
  const calls: DecodeCall[] = [];
  const backend: DecodeBackend = markSettlingBackend({
    shared: true,
    get name() {
      return `spy(${inner.name})`;
    },
    async decode(payload, meta, out, options) {
      const call: DecodeCall = { signal: options?.signal, abandonedCalls: 0, error: undefined };
      calls.push(call);
      const onAbandoned = options?.onAbandoned;
      const decoding = inner.decode(payload, meta, out, {
        ...options,
        onAbandoned: (settled) => {
          call.abandonedCalls += 1;
          onAbandoned?.(Promise.all([settled, hold]));
        },
      });
      onDecode();
      try {
        return await decoding;
      } catch (error) {
        call.error = error;
        throw error;
      }
    },
    close: () => inner.close!(),
  });
  return { backend, calls };
}

describe("a load aborted on the 'workers' backend", () => {
  it('reaches the workers: ABORTED at once, the slot kept until they are idle, the next load exact', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    let releaseHold!: () => void;
    const hold = new Promise<void>((resolve) => (releaseHold = resolve));
    let abortNext = true;
    const { backend, calls } = spyOnWorkerPool(() => {
      // The first decode only: aborted once its call is with the workers' decoder.
      if (abortNext) controller.abort(new Error('client went away'));
      abortNext = false;
    }, hold);
    // One shared slot (the pool loadModel makes for this backend): the next load must wait for it.
    const pool = createStagingPool({ slotBytes: 256 * 1024, slotCount: 1, shared: true });
    try {
      const first = loadTensor({ model: fixture.model, name: 'big.weight' }, { cache: fixture.cache, pool, backend, signal: controller.signal });
      await expect(first).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'big.weight' }) });
      // The runtime's own ABORTED (RuntimeError), not the decoder's.
      expect(isKernelsError(await first.catch((error: unknown) => error))).toBe(false);
      expect(calls).toHaveLength(1);
      expect(calls[0]!.signal).toBeInstanceOf(AbortSignal);
      expect(calls[0]!.signal!.aborted).toBe(true);
      // The decoder's call was abandoned (not decoded to the end), and said so.
      expect(calls[0]!.error).toMatchObject({ code: 'ABORTED' });
      expect(isKernelsError(calls[0]!.error)).toBe(true);
      expect(calls[0]!.abandonedCalls).toBe(1);
      // Kept from reuse while the workers may still read it.
      expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
      expect(pool.tryAcquire()).toBeUndefined();

      const next = loadTensor({ model: fixture.model, name: 'next.weight' }, { cache: fixture.cache, pool, backend });
      releaseHold();
      const loaded = await next;
      expect(loaded.source).toBe('cache');
      expect(sameBytes(loaded.data, fixture.raw.get('next.weight')!)).toBe(true);
      expect(calls).toHaveLength(2);
      expect(calls[1]!.signal).toBeUndefined();
      expect(pool.stats()).toMatchObject({ inUse: 0, quarantinedSlots: 0 });
    } finally {
      releaseHold();
      await backend.close!();
      pool.close();
    }
  });

  it('loadModel: ABORTED, the slot kept while the workers may read it; the next loadModel on the pool exact', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    let releaseHold!: () => void;
    const hold = new Promise<void>((resolve) => (releaseHold = resolve));
    const { backend, calls } = spyOnWorkerPool(() => controller.abort(new Error('shutting down')), hold);
    const pool = createStagingPool({ slotBytes: 256 * 1024, slotCount: 1, shared: true });
    try {
      const loading = loadModel(fixture.model, fixture.cache, { backend, pool, concurrency: 1, signal: controller.signal }).drain();
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
      expect(calls).toHaveLength(1);
      expect(calls[0]!.signal).toBeInstanceOf(AbortSignal);
      expect(calls[0]!.abandonedCalls).toBe(1);
      expect(pool.stats()).toMatchObject({ quarantinedSlots: 1 });
      releaseHold();
      // The spy aborts the first load's controller only, which has fired: this load runs to the end.
      const loaded = new Map<string, Uint8Array>();
      for await (const tensor of loadModel(fixture.model, fixture.cache, { backend, pool })) {
        loaded.set(tensor.name, tensor.data);
        expect(tensor.source).toBe('cache');
      }
      expect([...loaded.keys()].sort()).toEqual(['big.weight', 'next.weight']);
      for (const [name, data] of loaded) expect(sameBytes(data, fixture.raw.get(name)!)).toBe(true);
      expect(pool.stats()).toMatchObject({ inUse: 0, quarantinedSlots: 0 });
    } finally {
      releaseHold();
      await backend.close!();
      pool.close();
    }
  });

  it('a shared output buffer of the caller is not handed back while a worker may write it: that decode is not abandoned', { timeout: 30_000 }, async () => {
    const controller = new AbortController();
    const { backend, calls } = spyOnWorkerPool(() => controller.abort(new Error('client went away')));
    const pool = createStagingPool({ slotBytes: 256 * 1024, slotCount: 1, shared: true });
    const target = new Uint8Array(new SharedArrayBuffer(BIG_VALUES * 2));
    try {
      const loading = loadTensor({ model: fixture.model, name: 'big.weight' }, { cache: fixture.cache, pool, backend, signal: controller.signal, target });
      // Served (the decode had settled) or ABORTED after it: either way decoded whole first, so no
      // worker writes into `target` once the load settled.
      const outcome = await loading.then(
        () => 'served',
        (error: unknown) => (error as { code?: unknown }).code,
      );
      expect(['served', 'ABORTED']).toContain(outcome);
      expect(calls).toHaveLength(1);
      expect(calls[0]!.error).toBeUndefined();
      expect(calls[0]!.abandonedCalls).toBe(0);
      expect(sameBytes(target, fixture.raw.get('big.weight')!)).toBe(true);
      expect(pool.stats()).toMatchObject({ inUse: 0, quarantinedSlots: 0 });
    } finally {
      await backend.close!();
      pool.close();
    }
  });
});
