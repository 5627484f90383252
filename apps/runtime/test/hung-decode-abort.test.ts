// A decode backend whose decode never settles (a custom backend, a hung device): the load's abort
// still ends loadTensor and loadModel at once (ABORTED), and the staging slot the decode may still
// read is kept out of reuse until it settles, as for a custom reader's stalled read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kernels } from '@splitzip/kernels';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { bf16Weights, openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('hung-decode-abort', [...tunedWeights(['a', 'b'], 91), { name: 'wide.weight', dtype: 'BF16', shape: [64, 1024], data: bf16Weights(65536, 93) }]);
});
afterAll(async () => {
  await fixture.close();
});

/** A backend whose decodes wait until `finish()`, ignoring every abort; `decodeToNew` too when asked. */
function createHungBackend(withDecodeToNew = false): DecodeBackend & { calls: () => number; finish: () => void } {
  const cpu = createCpuDecoder();
  let calls = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const backend: DecodeBackend & { calls: () => number; finish: () => void } = {
    name: 'hung',
    calls: () => calls,
    finish: () => finish(),
    async decode(payload, meta, out, options) {
      calls += 1;
      await finished;
      return cpu.decode(payload, meta, out, options);
    },
  };
  if (withDecodeToNew) {
    backend.decodeToNew = async (payload, meta) => {
      calls += 1;
      await finished;
      const values = new Uint16Array(meta.elementCount);
      await cpu.decode(payload, meta, values);
      return { values, busyMs: 0 };
    };
  }
  return backend;
}

/** Aborts once the backend was asked to decode (the load is then waiting on it), with a hang guard. */
async function abortWhenDecoding(controller: AbortController, backend: { calls: () => number }): Promise<void> {
  for (let k = 0; k < 2000 && backend.calls() === 0; k++) await new Promise<void>((resolve) => setTimeout(resolve, 5));
  expect(backend.calls()).toBeGreaterThan(0);
  controller.abort(new Error('client went away'));
}

describe('a decode that never settles', () => {
  it.each([
    ['decode', false],
    ['decodeToNew', true],
  ] as const)('loadTensor (%s): ABORTED at once; the slot is set aside until the decode settles', { timeout: 20_000 }, async (_label, withDecodeToNew) => {
    const backend = createHungBackend(withDecodeToNew);
    // Small slots: the payload is staged in the pool, not in a buffer of its own.
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
    const controller = new AbortController();
    try {
      const loading = loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend, signal: controller.signal });
      await abortWhenDecoding(controller, backend);
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'a.weight' }) });
      expect(pool.tryAcquire()).toBeUndefined();
      expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
      backend.finish();
      const slot = await pool.acquire({ signal: AbortSignal.timeout(10_000) });
      expect(pool.stats()).toMatchObject({ quarantinedSlots: 0 });
      pool.release(slot);
    } finally {
      backend.finish();
      pool.close();
    }
  });

  it('a custom hashContentKey that never settles (verifyDigest): loadTensor ABORTED at once', { timeout: 20_000 }, async () => {
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
    const loading = loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, backend, verifyDigest: true, signal: controller.signal });
    await abortWhenDecoding(controller, { calls: () => hashes });
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('a custom readDecode that ignores the signal: loadTensor ABORTED at once; the slot it took stays its own until it settles', { timeout: 20_000 }, async () => {
    const cpu = createCpuDecoder();
    let reads = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const backend: DecodeBackend = {
      name: 'read-hangs',
      inlineMaxValues: 0,
      decode: (payload, meta, out, options) => cpu.decode(payload, meta, out, options),
      readDecode: (request) =>
        (async () => {
          const lease = await request.staging.take();
          request.open(lease);
          // Opened: the load now waits on this read alone.
          reads += 1;
          await finished;
          lease.release();
          throw new Error('the read the load gave up on');
        })(),
    };
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 2, shared: true });
    const controller = new AbortController();
    try {
      const loading = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend, signal: controller.signal });
      await abortWhenDecoding(controller, { calls: () => reads });
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
      expect(pool.stats().inUse).toBe(1);
      finish();
      await pool.acquire({ signal: AbortSignal.timeout(10_000) }).then((slot) => pool.release(slot));
      expect(pool.stats().inUse).toBe(0);
    } finally {
      finish();
      pool.close();
    }
  });

  it('a Kernels instance whose decode never settles: loadTensor ABORTED at once', { timeout: 20_000 }, async () => {
    let calls = 0;
    // The parts of a Kernels instance a load uses (resolveDecodeBackend takes it for one).
    const kernels = {
      backend: 'webgpu',
      disposed: false,
      decode: () => {
        calls += 1;
        return new Promise<never>(() => undefined);
      },
      decodeToDevice: () => new Promise<never>(() => undefined),
      dispose: () => undefined,
    } as unknown as Kernels;
    const controller = new AbortController();
    const loading = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, backend: kernels, signal: controller.signal });
    await abortWhenDecoding(controller, { calls: () => calls });
    await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('loadTensorToDevice (a Kernels decodeToDevice): ABORTED at once; the slot set aside, a late result freed', { timeout: 20_000 }, async () => {
    let calls = 0;
    let deleted = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const kernels = {
      backend: 'webgpu',
      disposed: false,
      decodeToDevice: async () => {
        calls += 1;
        await finished;
        return { backend: 'webgpu', location: 'gpu', elementCount: 0, delete: () => (deleted += 1), toArray: async () => new Uint16Array(0) };
      },
      dispose: () => undefined,
    } as unknown as Kernels;
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
    const controller = new AbortController();
    try {
      const loading = loadTensorToDevice({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, kernels, signal: controller.signal });
      await abortWhenDecoding(controller, { calls: () => calls });
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'a.weight' }) });
      expect(pool.tryAcquire()).toBeUndefined();
      expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
      expect(deleted).toBe(0);
      finish();
      const slot = await pool.acquire({ signal: AbortSignal.timeout(10_000) });
      expect(pool.stats()).toMatchObject({ quarantinedSlots: 0 });
      pool.release(slot);
      expect(deleted).toBe(1);
    } finally {
      finish();
      pool.close();
    }
  });

  it('loadModel: ABORTED at once', { timeout: 20_000 }, async () => {
    const backend = createHungBackend();
    const controller = new AbortController();
    try {
      const loading = loadModel(fixture.model, fixture.cache, { backend, signal: controller.signal }).drain();
      await abortWhenDecoding(controller, backend);
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
    } finally {
      backend.finish();
    }
  });
});

// The runtime's own backends are waited for: the CPU decoder writes into the caller's buffer between
// its returns to the event loop, and a load that rejected at the abort left it being written into.
describe("the runtime's own CPU decoder, aborted mid-decode", () => {
  it('is waited for: the caller\'s buffer is whole when loadTensor settles', { timeout: 20_000 }, async () => {
    // One chunk a slice: 64 returns to the event loop in this tensor's decode.
    const backend = createCpuDecoder({ sliceValues: 1024 });
    const raw = fixture.raw.get('wide.weight')!;
    const target = new Uint8Array(raw.byteLength);
    const controller = new AbortController();
    const loading = loadTensor({ model: fixture.model, name: 'wide.weight' }, { cache: fixture.cache, backend, target, signal: controller.signal }).then(
      (tensor) => tensor.source,
      (error: { code?: string }) => error.code,
    );
    let settled = false;
    void loading.then(() => (settled = true));
    // Aborted once the decode wrote its first slice (a hang guard bounds the wait).
    for (let k = 0; k < 100_000 && !settled && target.every((byte) => byte === 0); k++) await new Promise<void>((resolve) => setImmediate(resolve));
    controller.abort(new Error('client went away'));
    const outcome = await loading;
    expect(['ABORTED', 'cache']).toContain(outcome);
    expect(sameBytes(target, raw)).toBe(true);
  });
});
