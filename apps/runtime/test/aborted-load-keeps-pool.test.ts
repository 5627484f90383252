// An aborted loadModel on the 'workers' backend gives back the staging pool it borrowed while a
// slot of it is still quarantined (the workers may read the payload there until they are idle).
// The pool is kept for later loads once that slot is back, not before: a later load meanwhile gets
// another pool, and the one after the slot came back reuses it (no new memory to fault in, ~3 ms
// per MiB). Until 2026-12-07 the pool was dropped at give-back (a slot was out), so every load
// after an aborted one made a fresh pool.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createWorkerPoolDecoder } from '../src/create-kernels-decoder.js';
import type { StagingPool } from '../src/create-staging-pool.js';
import { releaseIdleStagingPools } from '../src/idle-staging-pools.js';
import { loadModel } from '../src/load-model.js';
import { markSettlingBackend } from '../src/settling-backends.js';
import { bf16Weights, openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

const VALUES = 65_536;

let fixture: CachedModelFixture;
/** Every pool the cache handle lent to a load, in order. */
const borrowed: StagingPool[] = [];
beforeAll(async () => {
  fixture = await openCachedModel('aborted-load-keeps-pool', [
    { name: 'a.weight', dtype: 'BF16', shape: [64, 1024], data: bf16Weights(VALUES, 81) },
    { name: 'b.weight', dtype: 'BF16', shape: [64, 1024], data: bf16Weights(VALUES, 82) },
  ]);
  const borrow = fixture.cache.borrowStagingPool.bind(fixture.cache);
  fixture.cache.borrowStagingPool = (request) => {
    const lent = borrow(request);
    borrowed.push(lent.pool);
    return lent;
  };
});
afterAll(async () => {
  releaseIdleStagingPools();
  await fixture.close();
});

/** The worker-pool backend, its abandoned decodes held until `hold` settles too, `onDecode` run once each call is with the workers. */
function workersBackend(onDecode: () => void = () => undefined, hold: Promise<void> = Promise.resolve()): DecodeBackend {
  const inner = createWorkerPoolDecoder({ threads: 1, minParallelElements: 0 });
  return markSettlingBackend({
    shared: true,
    get name() {
      return inner.name;
    },
    async decode(payload, meta, out, options) {
      const decoding = inner.decode(payload, meta, out, { ...options, onAbandoned: (settled) => options?.onAbandoned?.(Promise.all([settled, hold])) });
      onDecode();
      return decoding;
    },
    close: () => inner.close!(),
  });
}

async function loadAll(backend: DecodeBackend): Promise<void> {
  for await (const tensor of loadModel(fixture.model, fixture.cache, { backend, concurrency: 1 })) {
    expect(tensor.source).toBe('cache');
    expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!)).toBe(true);
  }
}

it('an aborted load on the workers: its pool is kept once the quarantined slot is back, never lent before', { timeout: 60_000 }, async () => {
  releaseIdleStagingPools();
  const controller = new AbortController();
  let releaseHold!: () => void;
  const hold = new Promise<void>((resolve) => (releaseHold = resolve));
  const aborting = workersBackend(() => controller.abort(new Error('client went away')), hold);
  const plain = workersBackend();
  try {
    const loading = loadModel(fixture.model, fixture.cache, { backend: aborting, concurrency: 1, signal: controller.signal }).drain();
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
    expect(borrowed).toHaveLength(1);
    const abortedPool = borrowed[0]!;
    expect(abortedPool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
    const acquiresThen = abortedPool.stats().acquires;

    // Quarantined: not lent. The next load gets a pool of its own, kept idle after it.
    await loadAll(plain);
    expect(borrowed).toHaveLength(2);
    expect(borrowed[1]).not.toBe(abortedPool);
    expect(abortedPool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1, acquires: acquiresThen });

    // The workers are done with the slot: the pool goes back among the idle ones, lent first.
    releaseHold();
    for (let turn = 0; turn < 100 && abortedPool.stats().inUse !== 0; turn++) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(abortedPool.stats()).toMatchObject({ inUse: 0, quarantinedSlots: 0 });
    await loadAll(plain);
    expect(borrowed).toHaveLength(3);
    expect(borrowed[2]).toBe(abortedPool);
    expect(abortedPool.stats().acquires).toBeGreaterThan(acquiresThen);
    // Both pools idle now.
    expect(releaseIdleStagingPools()).toBe(2);
  } finally {
    releaseHold();
    await aborting.close!();
    await plain.close!();
  }
});
