// Public entry points given null or a look-alike where the types ask for an object: each is a
// RuntimeError with a code (these escaped as bare TypeErrors: "Cannot read properties of null").
import { expect, it } from 'vitest';
import { createStagingPool } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { wrapCacheStore } from '../src/open-shard-cache.js';
import { runOrderedPipeline } from '../src/run-ordered-pipeline.js';
import { RuntimeError } from '../src/errors.js';
import { openCachedModel } from './fixtures.js';

async function codeOf(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(RuntimeError);
    return (error as RuntimeError).code;
  }
  return 'no error';
}

it('null options, stores, kernels and items, and a signal that is not an AbortSignal, are typed errors', async () => {
  const fixture = await openCachedModel('api-misuse');
  try {
    const name = fixture.model.tensors[0]!.name;
    expect(await codeOf(() => fixture.cache.createStagingPool(null as never))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(() => createThreadDecoder(null as never))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(() => wrapCacheStore(null as never))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(() => wrapCacheStore(fixture.cache.store, null as never))).toBe('INVALID_ARGUMENT');
    expect(await codeOf(() => loadTensorToDevice({ model: fixture.model, name }, { cache: fixture.cache, kernels: null as never }))).toBe('DEVICE_UNAVAILABLE');
    expect(await codeOf(() => loadTensorToDevice({ model: fixture.model, name }, null as never))).toBe('INVALID_ARGUMENT');
    expect(
      await codeOf(async () => {
        for await (const _ of runOrderedPipeline(null as never, { concurrency: 1, run: async (item: unknown) => item })) {
          // nothing comes
        }
      }),
    ).toBe('INVALID_ARGUMENT');
    const pool = createStagingPool({ slotBytes: 1024, slotCount: 1 });
    const held = await pool.acquire();
    try {
      // Checked before the wait (it was only touched once the pool had to wait).
      expect(await codeOf(() => pool.acquire({ signal: {} as never }))).toBe('INVALID_ARGUMENT');
      expect(await codeOf(() => pool.acquire(null as never))).toBe('INVALID_ARGUMENT');
    } finally {
      pool.release(held);
    }
  } finally {
    await fixture.close();
  }
});
