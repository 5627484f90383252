// An abort fired inside a custom reader's readExact, before it returns its promise (its synchronous
// part: a reader that aborts the load on its own error path, a callback that runs then), and a
// read that then stalls ignoring the signal: the load still rejects ABORTED at once. The listener
// that ends a stalled read came after the call, and missed an abort that came before it returns.
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SEGMENT_VALUES } from '@splitzip/codec';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, writeModel, type FixtureTensor } from './fixtures.js';

const TENSORS: FixtureTensor[] = [{ name: 'small', dtype: 'BF16', shape: [3001], data: bf16Weights(3001, 1) }];

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let cache: ShardCache;
beforeAll(async () => {
  const temp = await makeTempDir('abort-inside-read');
  root = temp.dir;
  cleanup = temp.cleanup;
  model = await writeModel(join(root, 'model'), TENSORS, 8 * 1024 * 1024);
  await buildCache(model, join(root, 'cache'));
  cache = await openShardCache(join(root, 'cache'));
  expect(TENSORS[0]!.shape[0]).toBeLessThan(SEGMENT_VALUES); // staged, not streamed
}, 60_000);
afterAll(async () => {
  await cache?.close();
  await model?.close();
  await cleanup?.();
});

/** A reader that, for paths `stallsOn` accepts, aborts `controller` before returning, then stalls ignoring the signal. */
function createAbortingReader(controller: AbortController, stallsOn: (path: string) => boolean) {
  const inner = createFileReader();
  const gates: (() => void)[] = [];
  let inFlight = 0;
  const reader: ByteReader = {
    readExact(path, target, positionBytes) {
      if (!stallsOn(path)) return inner.readExact(path, target, positionBytes);
      controller.abort(new Error('client went away'));
      inFlight += 1;
      return new Promise<void>((resolve) => gates.push(resolve))
        .then(() => inner.readExact(path, target, positionBytes))
        .finally(() => {
          inFlight -= 1;
        });
    },
    close: () => inner.close(),
  };
  return { reader, inFlight: () => inFlight, unstall: () => gates.splice(0).forEach((open) => open()) };
}

// Each hung before the fix: 10 s, not the default 60, for a test that takes milliseconds.
const HANG_MS = 10_000;

it('from the cache (a staged payload): ABORTED while the read stalls; its slot stays out of the pool until it settles', async () => {
  const controller = new AbortController();
  const stalled = createAbortingReader(controller, (path) => path.endsWith('.bin'));
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
  try {
    const loading = loadTensor({ model, name: 'small' }, { cache, reader: stalled.reader, pool, backend: createCpuDecoder(), signal: controller.signal });
    // Hung here before: the abort came before the listener that ends the wait.
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'small' }) });
    expect(stalled.inFlight()).toBe(1);
    expect(pool.tryAcquire()).toBeUndefined();
    stalled.unstall();
    const slot = await pool.acquire();
    expect(stalled.inFlight()).toBe(0);
    pool.release(slot);
  } finally {
    stalled.unstall();
    pool.close();
    await stalled.reader.close();
  }
}, HANG_MS);

it('raw (no cache): ABORTED while the read stalls', async () => {
  const controller = new AbortController();
  const stalled = createAbortingReader(controller, (path) => path.endsWith('.safetensors'));
  try {
    const loading = loadTensor({ model, name: 'small' }, { reader: stalled.reader, signal: controller.signal });
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
    expect(stalled.inFlight()).toBe(1);
  } finally {
    stalled.unstall();
    await stalled.reader.close();
  }
}, HANG_MS);
