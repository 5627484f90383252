import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKernels } from '@splitzip/kernels/node';
import { createWorkerPoolDecoder } from '../src/create-kernels-decoder.js';
import { createThreadDecoder, getSharedThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// A backend that says it is closed is refused up front (INVALID_ARGUMENT, as its warmUp() does):
// every tensor through it was a quiet `cache-failed` (DECODE_FAILED) fallback to raw.
let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('closed-backend');
});
afterAll(async () => {
  await fixture.close();
});

const refused = expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ option: 'backend' }) });

describe('a closed decode backend', () => {
  it('a closed thread decoder or worker pool: loadModel and loadTensor refuse it', async () => {
    const threads = createThreadDecoder({ threads: 1 });
    await threads.close();
    const workers = createWorkerPoolDecoder({ threads: 1 });
    await workers.close?.();
    for (const backend of [threads, workers]) {
      expect(backend.closed).toBe(true);
      expect(() => loadModel(fixture.model, fixture.cache, { backend })).toThrow(refused);
      await expect(loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, backend })).rejects.toEqual(refused);
    }
  });

  it('a disposed Kernels instance: refused up front, not a quiet raw fallback per tensor', async () => {
    const kernels = await createKernels({ backend: 'codec' });
    const served = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, backend: kernels });
    expect(served.report).toMatchObject({ source: 'cache', reason: 'cached' });
    await kernels.dispose();
    expect(() => loadModel(fixture.model, fixture.cache, { backend: kernels })).toThrow(refused);
    await expect(loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, backend: kernels })).rejects.toEqual(refused);
    await expect(loadTensorToDevice({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, kernels })).rejects.toEqual(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', details: { option: 'kernels' } }),
    );
  });

  it("the process-wide decoder behind 'threads', closed by a caller all the same, is replaced", async () => {
    const shared = getSharedThreadDecoder();
    expect(shared.closed).toBe(false);
    await shared.close();
    const loaded = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, backend: 'threads' });
    expect(loaded.report).toMatchObject({ source: 'cache', reason: 'cached' });
    expect(getSharedThreadDecoder()).not.toBe(shared);
  });
});

describe('a staging pool too small for an entry', () => {
  it('is not an error: the payload is staged in a buffer of its own and served from the cache', async () => {
    const info = fixture.model.getTensor('embed.weight')!;
    const pool = createStagingPool({ slotBytes: 1024, slotCount: 1 });
    try {
      const loaded = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, pool, cacheOnly: true });
      expect(loaded.report).toMatchObject({ source: 'cache', reason: 'cached' });
      expect(Buffer.from(loaded.data).equals(Buffer.from(fixture.raw.get(info.name)!))).toBe(true);
      const load = loadModel(fixture.model, fixture.cache, { pool, cacheOnly: true, filter: (t) => t.name === 'embed.weight' });
      await load.drain();
      expect(load.totals.stagingOverflows).toBe(1);
    } finally {
      pool.close();
    }
  });
});
