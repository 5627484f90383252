import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKernels, type Kernels } from '@splitzip/kernels/node';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createFileReader } from '../src/create-file-reader.js';
import { createCodecArena } from '@splitzip/codec';
import { createStagingPool } from '../src/create-staging-pool.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { releaseIdleStagingPools } from '../src/idle-staging-pools.js';
import { loadModel } from '../src/load-model.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import type { ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, openCachedModel, sameBytes, standardTensors, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
let model: SafetensorsModel;
let cache: ShardCache;
let raw: Map<string, Uint8Array>;

beforeAll(async () => {
  // Add one tensor large enough for the worker decoder to split it across threads (≥ 2^18 values).
  const tensors = [...standardTensors(), { name: 'big', dtype: 'BF16' as const, shape: [512, 600], data: bf16Weights(512 * 600, 77) }];
  fixture = await openCachedModel('backends', tensors);
  ({ model, cache, raw } = fixture);
});
afterAll(async () => {
  await fixture?.close();
});

async function checkAll(options: Parameters<typeof loadModel>[2]) {
  const load = loadModel(model, cache, options);
  for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
  return load.totals;
}

describe('decode backends', () => {
  it('the thread decoder is bit-exact into plain and shared buffers, and reuses its scratch', async () => {
    const threads = createThreadDecoder({ threads: 2, splitMinValues: 1 << 16, inlineMaxValues: 1024 });
    await threads.warmUp(); // the workers, not the startup inline path, are under test here
    try {
      // Plain buffers: decoded into shared scratch, copied out.
      const first = await checkAll({ backend: threads, verifyDigest: true });
      expect(first.fromCache).toBe(10);
      expect(first.backends).toEqual(['threads:2']);
      // Steady state: the scratch pool grows only while it holds fewer buffers than decodes overlap
      // (which depends on scheduling), then stops: a later pass allocates nothing, never one per tensor.
      let allocations = threads.stats().scratchAllocations;
      let stable = false;
      for (let pass = 0; pass < 5 && !stable; pass += 1) {
        await checkAll({ backend: threads });
        const now = threads.stats().scratchAllocations;
        stable = now === allocations;
        allocations = now;
      }
      expect(stable).toBe(true);
      expect(allocations).toBeLessThanOrEqual(8); // loadModel's default concurrency bounds the overlap
      // A shared arena: decoded in place, no scratch for outputs.
      const total = model.tensors.reduce((sum, t) => sum + t.slice.sizeBytes, 0);
      const arena = new Uint8Array(new SharedArrayBuffer(total));
      const offsets = new Map<string, number>();
      let cursor = 0;
      for (const t of model.tensors) {
        offsets.set(t.name, cursor);
        cursor += t.slice.sizeBytes;
      }
      const before = threads.stats().scratchAllocations;
      const totals = await loadModel(model, cache, {
        backend: threads,
        allocate: (t) => arena.subarray(offsets.get(t.name), (offsets.get(t.name) as number) + t.slice.sizeBytes),
      }).drain();
      expect(totals.fromCache).toBe(10);
      expect(threads.stats().scratchAllocations).toBe(before);
      for (const t of model.tensors) {
        const at = offsets.get(t.name) as number;
        expect(sameBytes(arena.subarray(at, at + t.slice.sizeBytes), raw.get(t.name) as Uint8Array), t.name).toBe(true);
      }
      // With the runtime's reader the checksum is the threads' job too.
      const reader = createFileReader();
      const viaReader = await checkAll({ backend: threads, reader });
      expect(viaReader.fromCache).toBe(10);
      await reader.close();
    } finally {
      await threads.close?.();
    }
  });

  it('the thread decoder reads payloads and writes tensors in place in a shared codec arena (staging slots and outputs in it)', async () => {
    const threads = createThreadDecoder({ threads: 2, splitMinValues: 1 << 16, inlineMaxValues: 1024 });
    await threads.warmUp(); // the workers, not the startup inline path, are under test here
    try {
      const total = model.tensors.reduce((sum, t) => sum + Math.ceil(t.slice.sizeBytes / 256) * 256, 0);
      const slotBytes = 1 << 20;
      const arena = createCodecArena(total + 4 * slotBytes, { threads: 2 });
      const pool = createStagingPool({ slotBytes, slotCount: 4, arena });
      expect(pool.arena).toBe(arena);
      const views = new Map(model.tensors.map((t) => [t.name, arena.allocate(t.slice.sizeBytes)]));
      for (const round of [0, 1]) {
        for (const view of views.values()) view.fill(0xa5);
        const totals = await loadModel(model, cache, { backend: threads, pool, allocate: (t) => views.get(t.name) as Uint8Array, verifyDigest: round === 0 }).drain();
        expect(totals.fromCache).toBe(10);
        for (const t of model.tensors) expect(sameBytes(views.get(t.name) as Uint8Array, raw.get(t.name) as Uint8Array), t.name).toBe(true);
      }
      // Every payload above the inline size went to the workers straight from the arena.
      expect(threads.stats().arenaDecodes).toBeGreaterThan(0);
      expect(threads.stats().scratchAllocations).toBe(0);
      // An arena without scratch areas for two threads is used like any shared buffer (still exact).
      const small = createCodecArena(total + 4 * slotBytes, { threads: 1 });
      const before = threads.stats().arenaDecodes;
      const smallPool = createStagingPool({ slotBytes, slotCount: 4, arena: small });
      const totals = await loadModel(model, cache, { backend: threads, pool: smallPool }).drain();
      expect(totals.fromCache).toBe(10);
      expect(threads.stats().arenaDecodes).toBe(before);
      expect(() => createStagingPool({ slotBytes, slotCount: 64, arena: small })).toThrow(/bytes free/);
    } finally {
      await threads.close?.();
    }
  });

  it('the thread decoder reads payloads from a staging pool outside any codec arena (where malloc gives huge pages)', async () => {
    const threads = createThreadDecoder({ threads: 2, splitMinValues: 1 << 16, inlineMaxValues: 1024 });
    await threads.warmUp();
    const saved = process.env.GLIBC_TUNABLES;
    try {
      const pool = createStagingPool({ slotBytes: 1 << 20, slotCount: 4, shared: true, threads: 2, codecArena: false });
      expect(pool.arena).toBeUndefined();
      const before = threads.stats().arenaDecodes;
      expect((await checkAll({ backend: threads, pool, verifyDigest: true })).fromCache).toBe(10);
      expect(threads.stats().arenaDecodes).toBe(before);
      // loadModel's own pool follows the process's malloc the same way (a fresh one: idle ones let go).
      releaseIdleStagingPools();
      process.env.GLIBC_TUNABLES = 'glibc.malloc.hugetlb=1';
      expect((await checkAll({ backend: threads, verifyDigest: true })).fromCache).toBe(10);
      expect(threads.stats().arenaDecodes).toBe(before);
    } finally {
      if (saved === undefined) delete process.env.GLIBC_TUNABLES;
      else process.env.GLIBC_TUNABLES = saved;
      releaseIdleStagingPools();
      await threads.close?.();
    }
  });

  it("'threads' by name: loadModel starts and stops its own decoder", async () => {
    const totals = await checkAll({ backend: 'threads' });
    expect(totals.fromCache).toBe(10);
    expect(totals.backends[0]).toMatch(/^threads:\d+$/);
  });

  it('the worker-thread decoder (kernels package) is bit-exact', async () => {
    const totals = await checkAll({ backend: 'workers', verifyDigest: true });
    expect(totals.fromCache).toBe(10);
    expect(totals.backends).toEqual(['workers:auto']);
  });

  it('a Kernels instance (gpu.js cpu mode) is bit-exact', async () => {
    const kernels = await createKernels({ backend: 'cpu' });
    try {
      const totals = await checkAll({ backend: kernels, concurrency: 2 });
      expect(totals.fromCache).toBe(10);
      expect(totals.backends).toEqual([`kernels:${kernels.backend}`]);
    } finally {
      await kernels.dispose();
    }
  });

  it('rejects an unknown backend name', () => {
    expect(() => loadModel(model, cache, { backend: 'tpu' as never })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('loadTensorToDevice', () => {
  for (const backend of ['codec', 'cpu'] as const) {
    it(`hands over the decoded tensor from the kernels (${backend}), bit-exact`, async () => {
      const kernels = await createKernels({ backend });
      try {
        for (const name of ['big', 'embed.weight', 'layer.0.attn.q']) {
          const tensor = await loadTensorToDevice({ model, name }, { cache, kernels, verifyDigest: true });
          expect(tensor).toMatchObject({ name, source: 'cache', reason: 'cached' });
          expect(tensor.report.digestVerified).toBe(true);
          expect(tensor.device?.location).toBe('host'); // no GPU on CI machines
          const values = (await tensor.device?.toArray()) as Uint16Array;
          expect(sameBytes(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), raw.get(name) as Uint8Array)).toBe(true);
          tensor.device?.delete();
        }
        const norm = await loadTensorToDevice({ model, name: 'layer.0.norm' }, { cache, kernels });
        expect(norm).toMatchObject({ source: 'raw', reason: 'dtype' });
        // Misses are explained as loadTensor explains them (explainMisses defaults to true).
        const spread = await loadTensorToDevice({ model, name: 'layer.0.spread' }, { cache, kernels });
        expect(spread).toMatchObject({ source: 'raw', reason: 'coverage', report: { detail: expect.stringMatching(/^coverage 0\.\d+ < gate/) } });
        expect(sameBytes(spread.data as Uint8Array, raw.get('layer.0.spread') as Uint8Array)).toBe(true);
        const unexplained = await loadTensorToDevice({ model, name: 'layer.0.spread' }, { cache, kernels, explainMisses: false });
        expect(unexplained).toMatchObject({ source: 'raw', reason: 'missing' });
        await expect(loadTensorToDevice({ model, name: 'layer.0.spread' }, { cache, kernels, cacheOnly: true })).rejects.toMatchObject({
          code: 'NOT_CACHED',
          details: { reason: 'missing' },
        });
        expect(norm.device).toBeUndefined();
        expect(sameBytes(norm.data as Uint8Array, raw.get('layer.0.norm') as Uint8Array)).toBe(true);
      } finally {
        await kernels.dispose();
      }
    });
  }

  it('a device decode that fails is reported and served raw; cacheOnly throws', async () => {
    const real = await createKernels({ backend: 'codec' });
    let deleted = 0;
    const broken = {
      ...real,
      backend: real.backend,
      decodeToDevice: async () => {
        throw new Error('device lost');
      },
    } as unknown as Kernels;
    const wrongCount = {
      ...real,
      backend: real.backend,
      decodeToDevice: async (payload: Uint8Array) => {
        const result = await real.decodeToDevice(payload);
        return { ...result, elementCount: result.elementCount - 1, delete: () => (deleted += 1) };
      },
    } as unknown as Kernels;
    try {
      const failed = await loadTensorToDevice({ model, name: 'big' }, { cache, kernels: broken });
      expect(failed).toMatchObject({ source: 'raw', reason: 'cache-failed', report: { error: { code: 'DECODE_FAILED' } } });
      expect(sameBytes(failed.data as Uint8Array, raw.get('big') as Uint8Array)).toBe(true);
      const short = await loadTensorToDevice({ model, name: 'big' }, { cache, kernels: wrongCount });
      expect(short).toMatchObject({ source: 'raw', reason: 'cache-failed' });
      expect(deleted).toBe(1); // the bad device result was freed
      await expect(loadTensorToDevice({ model, name: 'big' }, { cache, kernels: broken, cacheOnly: true })).rejects.toMatchObject({
        code: 'DECODE_FAILED',
      });
      await expect(loadTensorToDevice({ model, name: 'big' }, { cache } as never)).rejects.toMatchObject({ code: 'DEVICE_UNAVAILABLE' });
    } finally {
      await real.dispose();
    }
  });

  it('kernels disposed between the decode and the verifyDigest readback: DECODE_FAILED, served raw (was a bare KernelsError)', async () => {
    const real = await createKernels({ backend: 'webasm' }); // its results are DISPOSED once it is (the codec's stay readable)
    expect(real.backend).toBe('webasm');
    const disposedAfterDecode = {
      backend: real.backend,
      decodeToDevice: async (payload: Uint8Array) => {
        const result = await real.decodeToDevice(payload);
        await real.dispose(); // another part of the app shuts the kernels down
        return result;
      },
    } as unknown as Kernels;
    const tensor = await loadTensorToDevice({ model, name: 'big' }, { cache, kernels: disposedAfterDecode, verifyDigest: true });
    expect(tensor).toMatchObject({ source: 'raw', reason: 'cache-failed', report: { error: { code: 'DECODE_FAILED' } } });
    expect(sameBytes(tensor.data as Uint8Array, raw.get('big') as Uint8Array)).toBe(true);
  });

  it('a wrong target is refused before any work, whether the cache serves or not (it passed while the entry was good)', async () => {
    const kernels = await createKernels({ backend: 'codec' });
    try {
      const size = (raw.get('big') as Uint8Array).byteLength;
      await expect(loadTensorToDevice({ model, name: 'big' }, { cache, kernels, target: new Float32Array(size) as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(loadTensorToDevice({ model, name: 'big' }, { cache, kernels, target: new Uint8Array(size - 1) })).rejects.toMatchObject({ code: 'OUTPUT_TOO_SMALL' });
      const served = await loadTensorToDevice({ model, name: 'big' }, { cache, kernels, target: new Uint8Array(size) });
      expect(served).toMatchObject({ source: 'cache' });
      served.device?.delete();
    } finally {
      await kernels.dispose();
    }
  });
});
