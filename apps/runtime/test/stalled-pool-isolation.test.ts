import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool, type StagingPool, type StagingSlot } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

// Two loads whose staging pools had no free slot (their caller held the only one) stalled every
// other load of the process on the decode threads: each worker waited for a slot of a stalled
// pool, and the other load's reads queued behind them for good.

let fixture: CachedModelFixture;
// Every tensor read and decoded on the workers (no inline bound), as tensors of 2^21 values and more are.
const decoder = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });

beforeAll(async () => {
  fixture = await openCachedModel('stalled-pool-isolation', tunedWeights(['a', 'b', 'c', 'd', 'e'], 71));
  await decoder.warmUp();
});
afterAll(async () => {
  await decoder.close();
  await fixture?.close();
});

/**
 * Resolves once `check()` holds, or after ~2 s all the same (a load stalled behind another one
 * never asks its pool: the test then goes on, and the unrelated load shows the stall).
 */
async function until(check: () => boolean): Promise<void> {
  for (let k = 0; k < 400 && !check(); k++) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('a load waiting on its own full staging pool', () => {
  it('never delays another load of the same decode threads', { timeout: 30_000 }, async () => {
    const stalled: { pool: StagingPool; held: StagingSlot; asked: number; abort: AbortController; done: Promise<unknown> }[] = [];
    try {
      for (let k = 0; k < 2; k++) {
        const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, threads: 2 });
        const held = await pool.acquire();
        const entry = { pool, held, asked: 0, abort: new AbortController(), done: Promise.resolve() as Promise<unknown> };
        // Counts the decode threads' asks for a slot: the load is then waiting on its pool.
        const acquire = pool.acquire.bind(pool);
        pool.acquire = (options) => {
          entry.asked += 1;
          return acquire(options);
        };
        entry.done = (async () => {
          for await (const tensor of loadModel(fixture.model, fixture.cache, { pool, backend: decoder, signal: entry.abort.signal })) void tensor;
        })().catch((error: unknown) => error);
        stalled.push(entry);
        await until(() => entry.asked > 0);
      }
      // The unrelated load: its own pool (the default). The watchdog is a hang guard, not a timing.
      const load = loadModel(fixture.model, fixture.cache, { backend: decoder, signal: AbortSignal.timeout(20_000) });
      let count = 0;
      for await (const tensor of load) {
        expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!), tensor.name).toBe(true);
        count += 1;
      }
      expect(count).toBe(5);
      expect(load.totals.fromCache).toBe(5);
      // The stalled loads are still waiting for their slots.
      for (const entry of stalled) expect(entry.pool.stats().inUse).toBe(1);
    } finally {
      for (const entry of stalled) entry.abort.abort();
      await Promise.all(stalled.map((entry) => entry.done));
      for (const entry of stalled) entry.pool.release(entry.held);
    }
    // Aborted, the stalled loads left no slot taken (a late grant went back to its pool).
    await until(() => stalled.every((entry) => entry.pool.stats().inUse === 0));
    for (const entry of stalled) expect(entry.pool.stats().inUse).toBe(0);
  });
});
