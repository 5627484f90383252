import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool, type StagingPool } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, tunedWeights, type CachedModelFixture } from './fixtures.js';

// The decode threads' wait for a slot of a load's pool had no signal: once the reads it was for
// went away (aborted) or the decoder closed, it stayed in the pool's queue and took the next slot
// the caller released, ahead of the caller's own tryAcquire.

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('slot-wait-abort', tunedWeights(['a', 'b'], 57));
});
afterAll(async () => {
  await fixture?.close();
});

/** A pool of one slot its caller holds, counting the asks for a slot that wait. */
async function heldPool(): Promise<{ pool: StagingPool; release: () => void; asked: () => number }> {
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 2 });
  const held = await pool.acquire();
  let asked = 0;
  const acquire = pool.acquire.bind(pool);
  pool.acquire = (options) => {
    asked += 1;
    return acquire(options);
  };
  return { pool, release: () => pool.release(held), asked: () => asked };
}

async function until(check: () => boolean): Promise<void> {
  for (let k = 0; k < 2000 && !check(); k++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

describe("the decode threads' wait for a slot", () => {
  it('ends when the read it was for is aborted: the slot released next stays free', { timeout: 30_000 }, async () => {
    const decoder = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    const { pool, release, asked } = await heldPool();
    try {
      await decoder.warmUp();
      const controller = new AbortController();
      const loading = loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, backend: decoder, pool, signal: controller.signal });
      await until(() => asked() > 0);
      controller.abort(new Error('gone'));
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
      const { waits } = pool.stats();
      release();
      const slot = pool.tryAcquire();
      expect(slot).toBeDefined();
      expect(pool.stats().waits).toBe(waits);
      pool.release(slot!);
    } finally {
      await decoder.close();
      pool.close();
    }
  });

  it('ends when the decoder closes', { timeout: 30_000 }, async () => {
    const decoder = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    const { pool, release, asked } = await heldPool();
    try {
      await decoder.warmUp();
      const loading = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, backend: decoder, pool }).catch((error: unknown) => error);
      await until(() => asked() > 0);
      await decoder.close();
      await loading;
      release();
      const slot = pool.tryAcquire();
      expect(slot).toBeDefined();
      pool.release(slot!);
    } finally {
      pool.close();
    }
  });
});
