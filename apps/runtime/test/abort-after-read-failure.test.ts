// The streamed cache path (decode-streamed-payload.ts) failing for a reason of its own (its head
// read fails) while its other reads stall, ignoring the signal: the decode waits for every read it
// issued before it throws (a read in flight would write into a slot given to another tensor), and
// an abort during that wait ends the load at once (it was unheard: the load hung), the slot kept
// out of the pool until the reads settle. With no abort the read failure stands once they settle.
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SEGMENT_VALUES } from '@splitzip/codec';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, writeModel, type FixtureTensor } from './fixtures.js';
import { createStallingReader, expectSlotHeldUntilUnstalled } from './stalling-reader.js';

const S = SEGMENT_VALUES;
// Three segments: decoded as they stream in (format v3, at least two segments).
const TENSORS: FixtureTensor[] = [{ name: 'three', dtype: 'BF16', shape: [3, S - 5], data: bf16Weights(3 * (S - 5), 4, 0.004) }];
// Each hung before the fix: 10 s, not the default 60, for a test that takes milliseconds.
const HANG_MS = 10_000;

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let cacheIndex = 0;
beforeAll(async () => {
  const temp = await makeTempDir('abort-after-read-failure');
  root = temp.dir;
  cleanup = temp.cleanup;
  model = await writeModel(join(root, 'model'), TENSORS, 8 * 1024 * 1024);
}, 60_000);
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

async function freshCache(): Promise<ShardCache> {
  cacheIndex += 1;
  const dir = join(root, `cache-${cacheIndex}`);
  await buildCache(model, dir);
  return openShardCache(dir);
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A reader whose blob read at 0 (the payload's head) fails, and whose other blob reads stall until `unstall()`, ignoring the signal. */
function createFailingStalledReader() {
  let headFailed = false;
  const stalling = createStallingReader(async (path, positionBytes) => {
    await turn();
    if (path.endsWith('.bin') && positionBytes === 0) {
      headFailed = true;
      throw Object.assign(new Error('injected head failure'), { code: 'EIO' });
    }
    // Not a blob (the shards, read raw): read at once.
    return !path.endsWith('.bin');
  });
  return { ...stalling, headFailed: () => headFailed };
}

/** Until the head read has failed and its failure has reached the decode's wait for its other reads. */
async function untilHeadFailed(headFailed: () => boolean): Promise<void> {
  while (!headFailed()) await turn();
  await turn(); // the failure's way to the decode's wait is microtasks: over after a turn
}

it('an abort while the failed decode waits for its stalled reads: ABORTED at once, the slot quarantined until they settle', async () => {
  const cache = await freshCache();
  const stalled = createFailingStalledReader();
  const pool = createStagingPool({ slotBytes: 16 << 20, slotCount: 1 });
  const controller = new AbortController();
  try {
    expect(cache.largestPayloadBytes()).toBeLessThanOrEqual(pool.slotBytes); // staged in the pool's slot
    const loading = loadTensor({ model, name: 'three' }, { cache, reader: stalled.reader, pool, backend: createCpuDecoder(), signal: controller.signal });
    await untilHeadFailed(stalled.headFailed);
    expect(stalled.inFlight()).toBeGreaterThan(0);
    controller.abort(new Error('client went away'));
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'three' }) });
    expect(stalled.inFlight()).toBeGreaterThan(0);
    await expectSlotHeldUntilUnstalled(pool, stalled);
  } finally {
    stalled.unstall();
    pool.close();
    await stalled.reader.close();
    await cache.close();
  }
}, HANG_MS);

it('with no abort the head read failure stands once the stalled reads settle: the tensor is read raw, cache-failed', async () => {
  const cache = await freshCache();
  const stalled = createFailingStalledReader();
  const pool = createStagingPool({ slotBytes: 16 << 20, slotCount: 1 });
  const controller = new AbortController();
  try {
    let settled = false;
    const loading = loadTensor({ model, name: 'three' }, { cache, reader: stalled.reader, pool, backend: createCpuDecoder(), signal: controller.signal }).finally(() => {
      settled = true;
    });
    await untilHeadFailed(stalled.headFailed);
    expect(settled).toBe(false); // waiting for the stalled reads
    stalled.unstall();
    const tensor = await loading;
    expect(tensor.source).toBe('raw');
    expect(tensor.reason).toBe('cache-failed');
    expect(tensor.report.streamed).toBe(true);
    expect(tensor.report.error).toMatchObject({ code: 'CACHE_READ_FAILED', message: expect.stringContaining('injected head failure') });
    expect(stalled.inFlight()).toBe(0);
    expect(pool.available).toBe(1);
  } finally {
    stalled.unstall();
    pool.close();
    await stalled.reader.close();
    await cache.close();
  }
}, HANG_MS);
