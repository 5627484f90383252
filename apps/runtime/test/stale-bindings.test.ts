// A slice binding records the stamps of the shard files (size, times, inode) and objects (ETag) it was
// verified against: a model rewritten in place, copied, or another model with the same shard names
// must never be served the cached bytes of the file the cache was built from. A shard whose stamp
// the binding has no record of is checked once (its bytes hashed), then recorded or served raw.
import { cp, open, readdir, readFile, rename, rm, utimes } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { loadModel } from '../src/load-model.js';
import { createKernels } from '@splitzip/kernels/node';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { createFileReader } from '../src/create-file-reader.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { StoreError } from '@splitzip/store';
import { bf16Weights, buildCache, makeTempDir, objectSource, readAllRaw, sameBytes, writeModel, tunedWeights, type FixtureTensor } from './fixtures.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('stale'));
});
afterAll(async () => {
  await cleanup?.();
});

/** Two BF16 tensors per shard, two shards; `seed` changes the values of `changed` only. */
const tensors = (changedSeed = 0): FixtureTensor[] => tunedWeights(['a', 'b', 'c', 'd'], 11, changedSeed);

/** The standard model written to `modelDir` and built into `cacheDir` (a base the tests load other copies against). */
async function writeBuiltModel(modelDir: string, cacheDir: string): Promise<void> {
  const model = await writeModel(modelDir, tensors(), 2 * 8192 + 1024);
  try {
    await buildCache(model, cacheDir);
  } finally {
    await model.close();
  }
}

/**
 * The standard model written and built into a cache, and a fine-tune of it written beside it: the
 * same shard names and layout, b.weight's values changed. Returns the directories.
 */
async function writeBaseAndTuned(prefix: string): Promise<{ baseDir: string; tunedDir: string; cacheDir: string }> {
  const dirs = { baseDir: join(root, `${prefix}-base`), tunedDir: join(root, `${prefix}-tuned`), cacheDir: join(root, `${prefix}-cache`) };
  await writeBuiltModel(dirs.baseDir, dirs.cacheDir);
  await (await writeModel(dirs.tunedDir, tensors(100), 2 * 8192 + 1024)).close();
  return dirs;
}

/** Loads the whole model through the cache; every tensor must equal the file's bytes. */
async function loadAndCheck(model: SafetensorsModel, cacheDir: string) {
  const raw = await readAllRaw(model);
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(model, cache, { verifyDigest: false });
    for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
    return new Map(load.reports.map((r) => [r.name, r]));
  } finally {
    await cache.close();
  }
}

describe('slice bindings and the shard files they were verified against', () => {
  it('a model rewritten in place with other values, same layout and names: served raw (stale), never the cached bytes; a rebuild binds it again', async () => {
    const modelDir = join(root, 'in-place');
    const cacheDir = join(root, 'in-place-cache');
    const v1 = await writeModel(modelDir, tensors(), 2 * 8192 + 1024);
    expect(v1.shards).toHaveLength(2);
    await buildCache(v1, cacheDir);
    await v1.close();
    // File times are as coarse as the kernel's clock tick: a rewrite in the same tick would keep
    // them (a real rewrite comes long after its build).
    await sleep(20);
    const v2 = await writeModel(modelDir, tensors(100), 2 * 8192 + 1024);
    try {
      const reports = await loadAndCheck(v2, cacheDir);
      // Both files were written again: nothing of them is trusted. b.weight has other values (stale);
      // the others have the same bytes, which their check finds (unchecked, then recorded).
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(reports.get('b.weight')?.detail).toMatch(/^shard file model-00001-of-00002\.safetensors \(\d+:\d+:\d+:\d+\) holds other bytes/);
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(reports.get(name)).toMatchObject({ source: 'raw', reason: 'unchecked' });
      // A second load through a new handle: the recorded stamps are trusted; b.weight is hashed
      // again (a mismatch is remembered by the handle that found it only).
      const second = await loadAndCheck(v2, cacheDir);
      expect(second.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(second.get(name)).toMatchObject({ source: 'cache', reason: 'cached' });
      await buildCache(v2, cacheDir, { rebind: true });
      const after = await loadAndCheck(v2, cacheDir);
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(after.get(name)).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await v2.close();
    }
  });

  it('a model handle kept open while its files are rewritten in place: SHARD_CHANGED for cached and raw tensors alike, never the old cached bytes', async () => {
    const modelDir = join(root, 'held');
    const nextDir = join(root, 'held-next');
    const cacheDir = join(root, 'held-cache');
    const held = await writeModel(modelDir, tensors(), 2 * 8192 + 1024);
    await buildCache(held, cacheDir);
    await sleep(20);
    const next = await writeModel(nextDir, tensors(300), 2 * 8192 + 1024);
    const cache = await openShardCache(cacheDir);
    try {
      // The held handle serves from the cache while its files are as they were.
      expect(await loadTensor({ model: held, name: 'b.weight' }, { cache })).toMatchObject({ source: 'cache' });
      // Same layout, other values, written through the same inodes (not replaced by a rename).
      for (const shard of held.shards) {
        const handle = await open(shard.path, 'r+');
        await handle.write(await readFile(join(nextDir, shard.name)), 0);
        await handle.close();
      }
      for (const name of ['a.weight', 'b.weight']) {
        await expect(loadTensor({ model: held, name }, { cache }), name).rejects.toMatchObject({ code: 'SHARD_CHANGED', details: { tensor: name } });
        await expect(loadTensor({ model: held, name }, {}), `${name} without a cache`).rejects.toMatchObject({ code: 'SHARD_CHANGED' });
        const reader = createFileReader();
        await expect(loadTensor({ model: held, name }, { reader }), `${name} through a custom reader`).rejects.toMatchObject({ code: 'SHARD_CHANGED' });
        await reader.close();
      }
      await expect(async () => {
        for await (const _ of loadModel(held, cache)) void _;
      }).rejects.toMatchObject({ code: 'SHARD_CHANGED' });
      // Opened again: the new values, served raw (stale) until the cache is built for them.
      const reopened = await openSafetensorsModel(modelDir);
      try {
        const reports = await loadAndCheck(reopened, cacheDir);
        expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      } finally {
        await reopened.close();
      }
    } finally {
      await cache.close();
      await held.close();
      await next.close();
    }
  });

  it('a custom reader (it opens the path) after a shard was replaced by a rename under an open handle: SHARD_CHANGED, never old cached next to new raw', async () => {
    const modelDir = join(root, 'renamed');
    const nextDir = join(root, 'renamed-next');
    const cacheDir = join(root, 'renamed-cache');
    const held = await writeModel(modelDir, tensors(), 2 * 8192 + 1024);
    await buildCache(held, cacheDir);
    await sleep(20);
    const next = await writeModel(nextDir, tensors(400), 2 * 8192 + 1024);
    await next.close();
    const cache = await openShardCache(cacheDir);
    const reader = createFileReader();
    try {
      for (const shard of held.shards) await rename(join(nextDir, shard.name), shard.path);
      // Without a custom reader the handle reads the files it opened: consistent, old revision.
      const raw = await readAllRaw(held);
      expect(sameBytes((await loadTensor({ model: held, name: 'b.weight' }, { cache })).data, raw.get('b.weight')!)).toBe(true);
      // A raw read through the path reads the new file: refused. (No tensor of this model is raw
      // through the cache, so ask for one without the cache.)
      await expect(loadTensor({ model: held, name: 'b.weight' }, { reader })).rejects.toMatchObject({ code: 'SHARD_CHANGED', details: { tensor: 'b.weight' } });
    } finally {
      await reader.close();
      await cache.close();
      await held.close();
    }
  });

  it('another model with the same shard names (a fine-tune): its changed slices are raw, and both models load bit-exact from one cache', async () => {
    const baseDir = join(root, 'base');
    const tunedDir = join(root, 'tuned');
    const cacheDir = join(root, 'shared-cache');
    const base = await writeModel(baseDir, tensors(), 2 * 8192 + 1024);
    await sleep(20);
    const tuned = await writeModel(tunedDir, tensors(200), 2 * 8192 + 1024);
    try {
      await buildCache(base, cacheDir);
      const tunedReports = await loadAndCheck(tuned, cacheDir);
      expect(tunedReports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      // The tuned model's build moves b's slice to its bytes and adds its files' stamps to the rest.
      await buildCache(tuned, cacheDir, { rebind: true });
      const tunedAfter = await loadAndCheck(tuned, cacheDir);
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(tunedAfter.get(name)?.source).toBe('cache');
      const baseAfter = await loadAndCheck(base, cacheDir);
      expect(baseAfter.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(baseAfter.get(name)?.source).toBe('cache');
    } finally {
      await base.close();
      await tuned.close();
    }
  });

  it('a copy of the model (new file times): checked once, its stamps recorded, then both copies load from the cache', async () => {
    const modelDir = join(root, 'original');
    const copyDir = join(root, 'copy');
    const cacheDir = join(root, 'copy-cache');
    const original = await writeModel(modelDir, tensors(), 2 * 8192 + 1024);
    await buildCache(original, cacheDir);
    await sleep(20);
    await cp(modelDir, copyDir, { recursive: true });
    const copy = await openSafetensorsModel(copyDir);
    try {
      const before = await loadAndCheck(copy, cacheDir);
      for (const report of before.values()) expect(report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      for (const model of [copy, original]) {
        for (const report of (await loadAndCheck(model, cacheDir)).values()) expect(report.source).toBe('cache');
      }
    } finally {
      await copy.close();
      await original.close();
      await rm(copyDir, { recursive: true, force: true });
    }
  });

  it('the object-store copy of a model (a ByteSource, as openS3ObjectSource gives) is checked once against a cache built from the local files, then served from it', async () => {
    const modelDir = join(root, 'local-and-remote');
    const cacheDir = join(root, 'local-and-remote-cache');
    await writeBuiltModel(modelDir, cacheDir);
    const remote = await openSafetensorsModel({ source: await objectSource(modelDir, '"0123456789abcdef"') });
    try {
      expect(remote.shards.every((shard) => shard.stamp === 'etag:"0123456789abcdef"')).toBe(true);
      // First load: read raw, hashed, and the object recorded with each binding (one commit for the load).
      const first = await loadAndCheck(remote, cacheDir);
      for (const report of first.values()) {
        expect(report).toMatchObject({ source: 'raw', reason: 'unchecked' });
        expect(report.detail).toMatch(/being recorded with the binding/);
        expect(report.digestMs).toBeGreaterThan(0);
      }
      const cache = await openShardCache(cacheDir);
      const binding = cache.lookupSliceBinding(remote.tensors[0]!.slice.shardName, remote.tensors[0]!.slice.offsetBytes, remote.tensors[0]!.slice.sizeBytes);
      expect(binding?.stamps).toContain('etag:"0123456789abcdef"');
      await cache.close();
      // Later loads (another process: a fresh handle) come from the cache.
      for (const report of (await loadAndCheck(remote, cacheDir)).values()) expect(report).toMatchObject({ source: 'cache', reason: 'cached' });
      // The local copy is still served from the cache by its file stamps.
      const again = await openSafetensorsModel(join(modelDir, 'model.safetensors.index.json'));
      for (const report of (await loadAndCheck(again, cacheDir)).values()) expect(report).toMatchObject({ source: 'cache', reason: 'cached' });
      await again.close();
    } finally {
      await remote.close();
    }
  });

  it("another model's objects of the same names and layout (a fine-tune in S3) are never served the cached bytes: stale, raw, nothing recorded", async () => {
    const { tunedDir, cacheDir } = await writeBaseAndTuned('object');
    const tuned = await openSafetensorsModel({ source: await objectSource(tunedDir, '"tuned-etag"') });
    try {
      const reports = await loadAndCheck(tuned, cacheDir);
      // b.weight differs; the other three are the base's bytes, checked and recorded.
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(reports.get('b.weight')?.detail).toMatch(/holds other bytes/);
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(reports.get(name)).toMatchObject({ source: 'raw', reason: 'unchecked' });
      const next = await loadAndCheck(tuned, cacheDir);
      expect(next.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(next.get(name)).toMatchObject({ source: 'cache', reason: 'cached' });
      // cacheOnly cannot check an object without reading it: NOT_CACHED, saying why.
      const cache = await openShardCache(cacheDir);
      const rejected = loadTensor({ model: tuned, name: 'b.weight' }, { cache, cacheOnly: true });
      await expect(rejected).rejects.toMatchObject({
        code: 'NOT_CACHED',
        details: { reason: 'unchecked' },
        message: expect.stringMatching(/the binding has no record of shard object .*, and no load through this cache handle has checked it: a load without cacheOnly reads it raw and checks it \(the entry's bytes: served from the cache afterwards, and recorded where the cache can be written; other bytes: a build of this model with --rebind binds it\)\)$/),
      });
      // The handle that found b.weight stale says so without reading it (the detail names the remedy).
      const finder = await openShardCache(cacheDir);
      await loadTensor({ model: tuned, name: 'b.weight' }, { cache: finder });
      await expect(loadTensor({ model: tuned, name: 'b.weight' }, { cache: finder, cacheOnly: true })).rejects.toMatchObject({
        code: 'NOT_CACHED',
        details: { reason: 'stale' },
        message: expect.stringMatching(/holds other bytes than the entry its slice is bound to \(checked earlier through this cache; .*\): served raw; a build of this model with --rebind binds it\)$/),
      });
      await finder.close();
      await cache.close();
      // `objectSources: 'trust'` is the old rule: the binding is served unchecked (here: the base's bytes).
      const trusting = await openShardCache(cacheDir, { objectSources: 'trust' });
      const trusted = await loadTensor({ model: tuned, name: 'b.weight' }, { cache: trusting });
      expect(trusted.report).toMatchObject({ source: 'cache', reason: 'cached' });
      await trusting.close();
      await expect(openShardCache(cacheDir, { objectSources: 'never' as 'trust' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      await tuned.close();
    }
  });

  it('a check whose record fails (a read-only cache) still serves the right bytes; the handle keeps the check (later loads from the cache), says why other processes check again; a record never holds up a load', async () => {
    const modelDir = join(root, 'object-readonly');
    const cacheDir = join(root, 'object-readonly-cache');
    await writeBuiltModel(modelDir, cacheDir);
    const remote = await openSafetensorsModel({ source: await objectSource(modelDir, '"ro"') });
    const other = await openSafetensorsModel({ source: await objectSource(modelDir, '"ro2"') });
    const raw = await readAllRaw(remote);
    const refuse = Object.assign(new Error('read-only file system'), { code: 'EROFS' });
    const openRefusing = async () => {
      const cache = await openShardCache(cacheDir);
      cache.store.aliasSlices = async () => {
        throw refuse;
      };
      return cache;
    };
    const loadAll = async (model: SafetensorsModel, cache: Awaited<ReturnType<typeof openShardCache>>) => {
      const load = loadModel(model, cache, { verifyDigest: false });
      for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
      return load.reports;
    };
    const cache = await openRefusing();
    try {
      for (const report of await loadAll(remote, cache)) {
        expect(report).toMatchObject({ source: 'raw', reason: 'unchecked' });
        expect(report.detail).toMatch(/checked: its bytes are the entry's; later loads through this cache handle serve it from the cache, and its stamp is being recorded/);
      }
      const stats = await cache.flushObjectStamps!();
      expect(stats).toMatchObject({ recorded: 0, lastError: { code: 'EROFS' } });
      expect(stats.failed).toBeGreaterThan(0);
      // Nothing recorded, yet this handle serves them from the cache now (they checked every load before).
      for (const report of await loadAll(remote, cache)) expect(report).toMatchObject({ source: 'cache', reason: 'cached' });
      // A copy it has not checked (another ETag): checked, and told that other processes will check again.
      for (const report of await loadAll(other, cache)) {
        expect(report).toMatchObject({ source: 'raw', reason: 'unchecked' });
        expect(report.detail).toMatch(/this cache handle's last stamp record failed \(EROFS: read-only file system\): until one succeeds, other processes check again/);
      }
      // Another handle (another process) has no record and no check of its own: it checks.
      const fresh = await openRefusing();
      try {
        for (const report of await loadAll(remote, fresh)) expect(report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      } finally {
        await fresh.close();
      }
    } finally {
      await cache.close();
    }
    // A store that holds a record up (a writer lock a stopped builder keeps) does not hold up the load.
    const held = await openShardCache(cacheDir);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    held.store.aliasSlices = async () => {
      await gate;
      return [];
    };
    try {
      const started = performance.now();
      await loadModel(remote, held, { verifyDigest: false }).drain();
      expect(performance.now() - started).toBeLessThan(5000);
      release();
    } finally {
      await held.close();
    }
    // loadTensorToDevice checks the same way: its raw data, and the reason.
    const device = await openRefusing();
    const kernels = await createKernels({ backend: 'codec' });
    try {
      const onDevice = await loadTensorToDevice({ model: remote, name: 'a.weight' }, { cache: device, kernels });
      expect(onDevice).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(sameBytes(onDevice.data as Uint8Array, raw.get('a.weight')!)).toBe(true);
    } finally {
      await kernels.dispose();
      await device.close();
      await remote.close();
      await other.close();
    }
  });

  it.each(['INVALID_ARGUMENT', 'SLICE_CONFLICT', 'SIZE_INVALID'] as const)("one tensor's record the store refuses (%s: a stamp too long for an S3 key, a slice rebound meanwhile, an entry at MAX_SLICE_KEYS_PER_ENTRY) is that tensor's alone: the load's others are recorded", async (code) => {
    const modelDir = join(root, `object-one-refused-${code}`);
    const cacheDir = join(root, `object-one-refused-${code}-cache`);
    await writeBuiltModel(modelDir, cacheDir);
    const remote = await openSafetensorsModel({ source: await objectSource(modelDir, '"one"') });
    const refused = remote.getTensor('c.weight')!.slice;
    const cache = await openShardCache(cacheDir);
    const aliasSlices = cache.store.aliasSlices.bind(cache.store);
    const calls: number[] = [];
    cache.store.aliasSlices = async (items, options) => {
      calls.push(items.length);
      if (items.some((item) => item.offsetBytes === refused.offsetBytes && item.shardName === refused.shardName)) {
        throw new StoreError(code, 'refused for one item');
      }
      return aliasSlices(items, options);
    };
    try {
      const load = loadModel(remote, cache, { verifyDigest: false, concurrency: 4 });
      await load.drain();
      const stats = await cache.flushObjectStamps!();
      expect(stats).toMatchObject({ recorded: 3, failed: 1 });
      expect(calls[0]).toBeGreaterThan(1); // a batch, then one call per item
      for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) {
        const { shardName, offsetBytes, sizeBytes } = remote.getTensor(name)!.slice;
        const stamps = cache.lookupSliceBinding(shardName, offsetBytes, sizeBytes)!.stamps;
        expect(stamps.includes('etag:"one"'), name).toBe(name !== 'c.weight');
      }
    } finally {
      await cache.close();
      await remote.close();
    }
  });

  it('loads that check the same objects while their stamps are being recorded queue each stamp once; a wrapper store answering a non-array counts nothing and rejects nothing', async () => {
    const modelDir = join(root, 'object-twice');
    const cacheDir = join(root, 'object-twice-cache');
    await writeBuiltModel(modelDir, cacheDir);
    const remote = await openSafetensorsModel({ source: await objectSource(modelDir, '"twice"') });
    const cache = await openShardCache(cacheDir);
    const aliasSlices = cache.store.aliasSlices.bind(cache.store);
    let items = 0;
    cache.store.aliasSlices = async (batch, options) => {
      items += batch.length;
      await sleep(300);
      return aliasSlices(batch, options);
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await Promise.all([loadModel(remote, cache, { verifyDigest: false }).drain(), loadModel(remote, cache, { verifyDigest: false }).drain()]);
      const stats = await cache.flushObjectStamps!();
      expect(stats).toMatchObject({ recorded: 4, failed: 0 });
      expect(items).toBe(4);
      // A wrapper that forgets to return its results.
      const other = await openSafetensorsModel({ source: await objectSource(modelDir, '"other"') });
      cache.store.aliasSlices = (async () => undefined) as unknown as typeof cache.store.aliasSlices;
      await loadModel(other, cache, { verifyDigest: false }).drain();
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 4, failed: 0 });
      await other.close();
      await sleep(50);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await cache.close();
      await remote.close();
    }
  });

  it("sixteen object versions checked against a binding never push out its file stamps: another model's local file of the same name stays stale", async () => {
    const { baseDir, tunedDir, cacheDir } = await writeBaseAndTuned('evict');
    const tuned = await openSafetensorsModel(tunedDir);
    try {
      expect((await loadAndCheck(tuned, cacheDir)).get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (let version = 0; version < 20; version += 1) {
        const remote = await openSafetensorsModel({ source: await objectSource(baseDir, `"v${version}"`) });
        await loadAndCheck(remote, cacheDir);
        await remote.close();
      }
      const cache = await openShardCache(cacheDir);
      const slice = tuned.getTensor('b.weight')!.slice;
      const stamps = cache.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes)!.stamps;
      await cache.close();
      expect(stamps.filter((stamp) => stamp.startsWith('etag:')).length).toBeGreaterThan(8);
      expect(stamps.some((stamp) => !stamp.startsWith('etag:'))).toBe(true);
      expect((await loadAndCheck(tuned, cacheDir)).get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
    } finally {
      await tuned.close();
    }
  });

  it("a local fine-tune against bindings without file stamps (a cache built from the model's objects): checked, its changed tensor raw, never the base's bytes", async () => {
    const baseDir = join(root, 'objects-built-base');
    const tunedDir = join(root, 'objects-built-tuned');
    const cacheDir = join(root, 'objects-built-cache');
    await (await writeModel(baseDir, tensors(), 2 * 8192 + 1024)).close();
    // Built from the object copy: every binding holds the object's stamp, none a file's (as an
    // s3:// cache's bindings never do). Such a binding was trusted for any local file of its name.
    const remote = await openSafetensorsModel({ source: await objectSource(baseDir, '"base-etag"') });
    await buildCache(remote, cacheDir);
    await remote.close();
    const tuned = await writeModel(tunedDir, tensors(100), 2 * 8192 + 1024);
    try {
      const reports = await loadAndCheck(tuned, cacheDir);
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) {
        expect(reports.get(name)).toMatchObject({ source: 'raw', reason: 'unchecked' });
        expect(reports.get(name)?.detail).toMatch(/^shard file model-0000\d-of-00002\.safetensors \(\d+:\d+:\d+:\d+\) checked: its bytes are the entry's/);
      }
      const next = await loadAndCheck(tuned, cacheDir);
      expect(next.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(next.get(name)).toMatchObject({ source: 'cache', reason: 'cached' });
      // `fileSources: 'trust'` is the old rule: a binding is served for a file it has no record of (here: the base's bytes).
      const trusting = await openShardCache(cacheDir, { fileSources: 'trust' });
      const trusted = await loadTensor({ model: tuned, name: 'b.weight' }, { cache: trusting });
      expect(trusted.report).toMatchObject({ source: 'cache', reason: 'cached' });
      expect(sameBytes(trusted.data, (await readAllRaw(tuned)).get('b.weight') as Uint8Array)).toBe(false);
      await trusting.close();
      // objectSources: 'trust' says nothing about files.
      const objectsTrusted = await openShardCache(cacheDir, { objectSources: 'trust' });
      expect((await loadTensor({ model: tuned, name: 'b.weight' }, { cache: objectsTrusted })).report).toMatchObject({ source: 'raw', reason: 'stale' });
      await objectsTrusted.close();
      await expect(openShardCache(cacheDir, { fileSources: 'yes' as never })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'fileSources' } });
    } finally {
      await tuned.close();
    }
  });

  it('a shard found to hold other bytes is remembered by the cache handle: later loads through it serve the tensor raw without hashing it again', async () => {
    const { tunedDir, cacheDir } = await writeBaseAndTuned('mismatch');
    const tuned = await openSafetensorsModel(tunedDir);
    const cache = await openShardCache(cacheDir);
    try {
      const first = await loadTensor({ model: tuned, name: 'b.weight' }, { cache });
      expect(first.report).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(first.report.digestMs).toBeGreaterThan(0);
      const second = await loadTensor({ model: tuned, name: 'b.weight' }, { cache });
      expect(second.report).toMatchObject({ source: 'raw', reason: 'stale', digestMs: 0 });
      // The base's file's binding, from another file of the shard name (see the other-file case below).
      expect(second.report.detail).toMatch(/holds other bytes than the entry its slice is bound to \(checked earlier through this cache; bound from another file of this shard name \(.*\): the binding's stamps: \d+:\d+:\d+:\d+\)/);
      expect(sameBytes(second.data, (await readAllRaw(tuned)).get('b.weight') as Uint8Array)).toBe(true);
    } finally {
      await cache.close();
      await tuned.close();
    }
  });

  it("fileSources: 'trust' serves a binding with no file stamps, never one recorded against other files (a model rewritten in place): that one is checked", async () => {
    const modelDir = join(root, 'trust-in-place');
    const cacheDir = join(root, 'trust-in-place-cache');
    await writeBuiltModel(modelDir, cacheDir);
    await sleep(20);
    const v2 = await writeModel(modelDir, tensors(100), 2 * 8192 + 1024);
    const cache = await openShardCache(cacheDir, { fileSources: 'trust' });
    try {
      const loaded = await loadTensor({ model: v2, name: 'b.weight' }, { cache });
      expect(loaded.report).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(sameBytes(loaded.data, (await readAllRaw(v2)).get('b.weight') as Uint8Array)).toBe(true);
    } finally {
      await cache.close();
      await v2.close();
    }
  });

  it('another model whose tensor at a bound slice has another dtype or shape: served raw (dtype / missing), never hashed as the entry\'s BF16 shape, never a thrown store error', async () => {
    const baseDir = join(root, 'other-dtype-base');
    const otherDir = join(root, 'other-dtype');
    const cacheDir = join(root, 'other-dtype-cache');
    await writeBuiltModel(baseDir, cacheDir);
    await holdSecondBinding(cacheDir); // format 3 already: a load binds beside only then
    // Same names, offsets and sizes (8192 B each): a.weight as F32 [64, 32], b.weight as BF16 [32, 128].
    const other = await writeModel(
      otherDir,
      [
        { name: 'a.weight', dtype: 'F32', shape: [64, 32], data: bf16Weights(4096, 11) },
        { name: 'b.weight', dtype: 'BF16', shape: [32, 128], data: bf16Weights(4096, 12) },
        { name: 'c.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 13) },
        { name: 'd.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 14) },
      ],
      2 * 8192 + 1024,
    );
    try {
      const base = await openSafetensorsModel(baseDir);
      expect(other.tensors.map((t) => t.slice)).toEqual(base.tensors.map((t) => t.slice));
      await base.close();
      const reports = await loadAndCheck(other, cacheDir);
      expect(reports.get('a.weight')).toMatchObject({ source: 'raw', reason: 'dtype' });
      // Bound only from the base's file, to an entry of another shape: as unbound for this file (one
      // binding per file), looked up by content key with its own shape (no entry holds it). Until
      // 0.56 `stale`, unhashed, until gc --model removed the base's binding.
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'missing' });
      expect(reports.get('b.weight')?.detail).toMatch(/^no entry for this slice \(coverage \S+ passes the gate\)$/);
      for (const name of ['c.weight', 'd.weight']) expect(reports.get(name)).toMatchObject({ source: 'raw', reason: 'unchecked' });
    } finally {
      await other.close();
    }
  });

  it("a fine-tune whose files have the base's sizes and modification times (touch -r, rsync -t, tar, pinned file systems) is checked, never served the base's bytes", async () => {
    const baseDir = join(root, 'pinned-base');
    const tunedDir = join(root, 'pinned-tuned');
    const cacheDir = join(root, 'pinned-cache');
    const pinned = new Date(1_700_000_000_000);
    await (await writeModel(baseDir, tensors(), 2 * 8192 + 1024)).close();
    for (const name of await readdir(baseDir)) await utimes(join(baseDir, name), pinned, pinned);
    const base = await openSafetensorsModel(baseDir);
    await buildCache(base, cacheDir);
    await base.close();
    await (await writeModel(tunedDir, tensors(100), 2 * 8192 + 1024)).close();
    for (const name of await readdir(tunedDir)) await utimes(join(tunedDir, name), pinned, pinned);
    const tuned = await openSafetensorsModel(tunedDir);
    try {
      const reports = await loadAndCheck(tuned, cacheDir);
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      for (const name of ['a.weight', 'c.weight', 'd.weight']) expect(reports.get(name)).toMatchObject({ source: 'raw', reason: 'unchecked' });
    } finally {
      await tuned.close();
    }
  });
  it("a binding recorded only with other files of the shard name (another model's or revision's): stale names it so, with the builder's remedies (--rebind keeps a skipped tensor's such binding); one rewritten in place names --rebind", async () => {
    const { baseDir, tunedDir, cacheDir } = await writeBaseAndTuned('other-file');
    const otherFile = /bound from another file of this shard name \(another model's or revision's, or a replaced shard\)/;
    // A local cache keeps one binding per file: a build binds this file's beside (until 0.56: a cache
    // per model, or --rebind and --rebind-other-files).
    const remedy =
      /: served raw; a build of this model binds this file's tensors beside the other files' bindings \(one binding per file: revisions of a model share the cache; a tensor that build skips[^)]*\)$/;
    const tuned = await openSafetensorsModel(tunedDir);
    const cache = await openShardCache(cacheDir);
    try {
      // Checked now (its bytes hashed), then checked earlier through this handle: both name it.
      // Until 2026-12-07 both said only "a build of this model with --rebind binds it", which a
      // skipped tensor's such binding survives.
      for (const when of ['checked now', 'checked earlier']) {
        const { report } = await loadTensor({ model: tuned, name: 'b.weight' }, { cache });
        expect(report, when).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(report.detail, when).toMatch(otherFile);
        expect(report.detail, when).toMatch(remedy);
        if (when === 'checked earlier') expect(report.detail).toMatch(/ \(checked earlier through this cache; bound from another file of this shard name \(.*\): the binding's stamps: \d+:\d+:\d+:\d+\): served raw; /);
      }
    } finally {
      await cache.close();
      await tuned.close();
    }
    // The base's own file, rewritten in place with the tuned bytes (its inode, which the binding
    // has a stamp of): a build with --rebind moves that binding, as the detail says.
    await sleep(20);
    const base = await openSafetensorsModel(baseDir);
    for (const shard of base.shards) {
      const handle = await open(shard.path, 'r+');
      await handle.write(await readFile(join(tunedDir, shard.name)), 0);
      await handle.close();
    }
    await base.close();
    const rewritten = await openSafetensorsModel(baseDir);
    const again = await openShardCache(cacheDir);
    try {
      const { report } = await loadTensor({ model: rewritten, name: 'b.weight' }, { cache: again });
      expect(report).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(report.detail).not.toMatch(otherFile);
      expect(report.detail).toMatch(/: served raw; a build of this model with --rebind binds it$/);
    } finally {
      await again.close();
      await rewritten.close();
    }
  });
});

