import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

// A read of a pool holding no slot on a worker needs an idle worker. Loads looping on another pool
// kept both workers at two jobs each, so none ever idled: the read waited until they stopped.

let fixture: CachedModelFixture;
// Every tensor read and decoded on the workers (no inline bound).
const decoder = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
/** Tensors of the busy loads delivered, at most, before the other load's tensor arrives. */
const MAX_TENSORS_BEFORE = 200;
/** Hang guard: the busy loads stop after this many tensors (the old code then lets the read through). */
const STOP_AFTER_TENSORS = 3000;

beforeAll(async () => {
  fixture = await openCachedModel('busy-pool-fairness', tunedWeights(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], 83));
  await decoder.warmUp();
});
afterAll(async () => {
  await decoder.close();
  await fixture?.close();
});

describe('a read of a pool with no slot on a worker', () => {
  it('is not held back by loads of a busy pool that keep coming', { timeout: 60_000 }, async () => {
    const poolA = createStagingPool({ slotBytes: 64 * 1024, slotCount: 8, shared: true, threads: 2 });
    const poolB = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 2 });
    let aTensors = 0;
    let stop = false;
    const loop = async () => {
      while (!stop && aTensors < STOP_AFTER_TENSORS) {
        for await (const tensor of loadModel(fixture.model, fixture.cache, { pool: poolA, backend: decoder, concurrency: 8 })) {
          void tensor;
          aTensors += 1;
        }
      }
    };
    const loops = Promise.all([loop(), loop(), loop(), loop()]);
    try {
      // The busy loads are running (every worker holds a slot of pool A).
      while (aTensors < 50) await new Promise((resolve) => setTimeout(resolve, 1));
      const before = aTensors;
      const tensor = await loadTensor({ model: fixture.model, name: 'e.weight' }, { cache: fixture.cache, backend: decoder, pool: poolB });
      const during = aTensors - before;
      expect(sameBytes(tensor.data, fixture.raw.get('e.weight')!)).toBe(true);
      expect(during).toBeLessThan(MAX_TENSORS_BEFORE);
    } finally {
      stop = true;
      await loops;
    }
    expect(poolA.stats().inUse).toBe(0);
    expect(poolB.stats().inUse).toBe(0);
  });
});
