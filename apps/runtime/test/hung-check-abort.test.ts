// Two waits of a load that were not raced against its signal: the hash that checks an unchecked
// tensor's raw bytes against its binding (checkSourceBytes), and loadTensorToDevice's verifyDigest
// readback (device.toArray()). A custom backend's hash or a device's readback that never settles
// held the aborted load pending for good; it now rejects ABORTED at once, as the other waits do.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kernels } from '@splitzip/kernels';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, tunedWeights, writeModel } from './fixtures.js';

/** What a load gave within `ms` (a hang guard, not a timing check): its result or error, or 'pending'. */
async function outcomeWithin(loading: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const guard = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  try {
    return await Promise.race([loading.then(() => 'resolved', (error: unknown) => error), guard]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until `calls()` > 0 (the load is then waiting on that call), with a hang guard. */
async function waitForCall(calls: () => number): Promise<void> {
  for (let k = 0; k < 2000 && calls() === 0; k++) await new Promise<void>((resolve) => setTimeout(resolve, 5));
  expect(calls()).toBeGreaterThan(0);
}

let root: string;
let cleanup: () => Promise<void>;
let cache: ShardCache;
let base: SafetensorsModel;
let copy: SafetensorsModel;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('hung-check-abort'));
  const tensors = tunedWeights(['a', 'b'], 41);
  base = await writeModel(join(root, 'base'), tensors, 1 << 20, 'model');
  await buildCache(base, join(root, 'cache'));
  // A copy of the model (new files: the bindings have no record of their stamps): its tensors are
  // read raw and their bytes hashed against the binding (unchecked).
  copy = await writeModel(join(root, 'copy'), tensors, 1 << 20, 'model');
  cache = await openShardCache(join(root, 'cache'));
});
afterAll(async () => {
  await cache?.close();
  await base?.close();
  await copy?.close();
  await cleanup?.();
});

describe('a wait of a load that never settles', () => {
  it("an unchecked tensor's check, a custom hashContentKey that never settles: loadTensor ABORTED at once", { timeout: 20_000 }, async () => {
    const cpu = createCpuDecoder();
    let hashes = 0;
    const backend: DecodeBackend = {
      name: 'hash-hangs',
      decode: (payload, meta, out, options) => cpu.decode(payload, meta, out, options),
      hashContentKey: () => {
        hashes += 1;
        return new Promise<never>(() => undefined);
      },
    };
    const controller = new AbortController();
    const loading = loadTensor({ model: copy, name: 'a.weight' }, { cache, backend, signal: controller.signal });
    await waitForCall(() => hashes);
    controller.abort(new Error('client went away'));
    expect(await outcomeWithin(loading, 5_000)).toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'a.weight' }) });
    // The check's own answer without an abort: the same bytes, unchecked (hashed here, settling).
    expect((await loadTensor({ model: copy, name: 'a.weight' }, { cache, backend: cpu })).report.reason).toBe('unchecked');
  });

  it("loadTensorToDevice's verifyDigest readback that never settles: ABORTED at once, the device result freed once it settles", { timeout: 20_000 }, async () => {
    let readbacks = 0;
    let deleted = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const elementCount = 64 * 64;
    const kernels = {
      backend: 'webgpu',
      disposed: false,
      decodeToDevice: async () => ({
        backend: 'webgpu',
        location: 'gpu',
        elementCount,
        delete: () => (deleted += 1),
        toArray: async () => {
          readbacks += 1;
          await finished;
          return new Uint16Array(elementCount);
        },
      }),
      dispose: () => undefined,
    } as unknown as Kernels;
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
    const controller = new AbortController();
    try {
      const loading = loadTensorToDevice({ model: base, name: 'a.weight' }, { cache, pool, kernels, verifyDigest: true, signal: controller.signal });
      await waitForCall(() => readbacks);
      controller.abort(new Error('client went away'));
      expect(await outcomeWithin(loading, 5_000)).toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'a.weight' }) });
      expect(deleted).toBe(0); // the readback may still read it
      finish();
      for (let k = 0; k < 2000 && deleted === 0; k++) await new Promise<void>((resolve) => setTimeout(resolve, 1));
      expect(deleted).toBe(1);
    } finally {
      finish();
      pool.close();
    }
  });
});
