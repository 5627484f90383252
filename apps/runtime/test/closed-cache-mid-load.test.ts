import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

// A cache handle closed while a load still reads through it: the blob reads fail with the store's
// STORE_CLOSED and those tensors are served raw. Their report's detail said "if its blob is missing
// or damaged, … --repair puts it back", sending the operator to repair a cache that is fine.
let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('closed-cache-mid-load');
});
afterAll(async () => {
  await fixture.close();
});

describe('a cache closed mid-load', () => {
  it.each(['cpu', 'threads'] as const)('backend %s: the tensors it could not read are raw, and their detail says the handle was closed, not that a blob needs repair', async (backend) => {
    const cache: ShardCache = await openShardCache(`${fixture.dir}/cache`);
    // The load's only slot is held here: every cached tensor is looked up, then waits for it.
    const pool = createStagingPool({ slotBytes: cache.largestPayloadBytes(), slotCount: 1, shared: backend === 'threads' });
    const held = pool.tryAcquire() as NonNullable<ReturnType<typeof pool.tryAcquire>>;
    let closing: Promise<void> | undefined;
    const load = loadModel(fixture.model, cache, {
      backend,
      pool,
      // Called as each tensor starts, after every lookup: the handle closes under the load.
      // (A buffer of the tensor's size: undefined is INVALID_ARGUMENT since 2026-12-07.)
      allocate: (info) => {
        closing ??= cache.close();
        return new Uint8Array(info.slice.sizeBytes);
      },
    });
    const delivered = new Map<string, Uint8Array>();
    const draining = (async () => {
      for await (const tensor of load) delivered.set(tensor.name, tensor.data);
    })();
    while (closing === undefined) await new Promise<void>((resolve) => setImmediate(resolve));
    await closing;
    pool.release(held);
    await draining;
    const failed = load.reports.filter((report) => report.reason === 'cache-failed');
    expect(failed.length).toBeGreaterThan(0);
    for (const report of failed) {
      expect(report.error?.code).toBe('CACHE_READ_FAILED');
      expect(report.detail).toContain('STORE_CLOSED');
      expect(report.detail).toContain('the cache handle was closed (`cache.close()`) while this load still read from it: nothing is wrong with the cache');
      expect(report.detail).not.toContain('--repair');
    }
    for (const [name, data] of delivered) expect(sameBytes(data, fixture.raw.get(name) as Uint8Array)).toBe(true);
    pool.close();
  });
});
