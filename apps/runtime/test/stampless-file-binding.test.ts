// A shard with no stamp (a ByteSource without an ETag, a caller's model whose shard stamp is null)
// at a slice whose ONE binding was recorded only from local files (their stamps) may be another
// revision's binding: this revision's entry unbound (a tensor a build skipped or did not bind, an
// unbind, an eviction). Served unchecked, it gave revision A's bytes to a model of revision B,
// reported `cached`. Checked at every load instead, as at a slice with several bindings;
// objectSources 'trust' serves it unchecked as before. A single binding with no stamp or an
// object's stays trusted (cached). A tensor of another shape than every binding's entry is `stale`
// unhashed, as a stamped shard's is (it was `missing`, "no entry for this slice").
import { join } from 'node:path';
import { OBJECT_STAMP_PREFIX, openSafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import { name, revisionA, revisionB, stamplessSource, useCleanups } from './helpers/two-revisions.js';

const cleanups = useCleanups();

/** A with layer 2 of another shape, the same byte size (at the same slice): another model's tensor there. */
const reshaped = (): FixtureTensor[] => revisionA().map((t, k) => (k === 2 ? { ...t, shape: [32, 128], data: bf16Weights(4096, 555) } : t));

/** A and B built into one cache from their files; B's changed layer 2 has its entry, unbound: the slice's one binding is A's, with A's file stamp only. */
async function revisionAOnlyBound() {
  const { dir, cleanup } = await makeTempDir('stampless-file-binding-');
  cleanups.push(cleanup);
  const a = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const b = await writeModel(join(dir, 'B'), revisionB(), 80 * 1024);
  cleanups.push(() => a.close(), () => b.close());
  const cacheDir = join(dir, 'cache');
  await buildCache(a, cacheDir, { sliceBindingsPerFile: true });
  const keysB = await buildCache(b, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(2)] });
  return { dir, cacheDir, rawA: await readAllRaw(a), rawB: await readAllRaw(b), keyB: keysB.get(name(2))! };
}

it("a stampless model of revision B at a slice bound only from A's files: B's bytes, stale (was A's bytes, cached)", async () => {
  const { dir, cacheDir, rawA, rawB, keyB } = await revisionAOnlyBound();
  expect(sameBytes(rawA.get(name(2))!, rawB.get(name(2))!)).toBe(false);
  const cache = await openShardCache(cacheDir);
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'B')) });
  try {
    expect(model.shards[0]!.stamp ?? null).toBeNull();
    const slice = model.getTensor(name(2))!.slice;
    const bindings = cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes);
    expect(bindings).toHaveLength(1);
    expect(bindings[0]!.entry.key).not.toBe(keyB);
    expect(cache.getEntry(keyB)).toBeDefined();
    for (let load = 0; load < 2; load++) {
      const t = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
      expect(sameBytes(t.data, rawB.get(name(2))!), `load ${load}: B's bytes`).toBe(true);
      expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(t.report.detail).toMatch(/\(no stamp\) holds other bytes than the entry of the slice's one binding, recorded from local files only/);
      // Its remedy is a binding of B's own bytes (or a cache of its own), never the trust opt-in, which would serve A's bytes.
      expect(t.report.detail).toMatch(/a build of this revision binds the tensor beside that binding .*, or a cache of its own for this revision/);
      expect(t.report.detail).not.toMatch(/objectSources/);
    }
    expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0 });
  } finally {
    await model.close();
    await cache.close();
  }
});

it("a stampless model of A itself: A's bytes, unchecked at every load; objectSources 'trust' serves it cached; cacheOnly: NOT_CACHED 'unchecked' naming the opt-in", async () => {
  const { dir, cacheDir, rawA } = await revisionAOnlyBound();
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'A')) });
  cleanups.push(() => model.close());
  const checking = await openShardCache(cacheDir);
  try {
    for (let load = 0; load < 2; load++) {
      const t = await loadTensor({ model, name: name(2) }, { cache: checking, backend: 'cpu' });
      expect(sameBytes(t.data, rawA.get(name(2))!)).toBe(true);
      expect(t).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(t.report.detail).toMatch(/\(no stamp\) checked: its bytes are entry [0-9a-f]{40}'s, the slice's one binding, recorded from local files only .*objectSources: 'trust'/);
    }
    const error = await loadTensor({ model, name: name(2) }, { cache: checking, backend: 'cpu', cacheOnly: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: name(2), reason: 'unchecked' } });
    expect((error as Error).message).toMatch(/objectSources: 'trust'/);
    expect(await checking.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0 });
  } finally {
    await checking.close();
  }
  // A bare slice request names no file to check: its one binding serves it, by design (README).
  const slice = model.getTensor(name(2))!.slice;
  const bare = await openShardCache(cacheDir);
  try {
    const t = await loadTensor(slice, { cache: bare, backend: 'cpu', cacheOnly: true });
    expect(sameBytes(t.data, rawA.get(name(2))!)).toBe(true);
    expect(t).toMatchObject({ source: 'cache', reason: 'cached' });
  } finally {
    await bare.close();
  }
  const trusting = await openShardCache(cacheDir, { objectSources: 'trust' });
  try {
    const t = await loadTensor({ model, name: name(2) }, { cache: trusting, backend: 'cpu', cacheOnly: true });
    expect(sameBytes(t.data, rawA.get(name(2))!)).toBe(true);
    expect(t).toMatchObject({ source: 'cache', reason: 'cached' });
  } finally {
    await trusting.close();
  }
});

/** A's files as a stampless model, its cache built from that model: bindings without stamps. */
async function stamplessBuilt(tensors: FixtureTensor[]) {
  const { dir, cleanup } = await makeTempDir('stampless-file-binding-');
  cleanups.push(cleanup);
  const files = await writeModel(join(dir, 'A'), tensors, 80 * 1024);
  cleanups.push(() => files.close());
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'A')) });
  cleanups.push(() => model.close());
  const cacheDir = join(dir, 'cache');
  const keys = await buildCache(model, cacheDir, { sliceBindingsPerFile: true });
  return { dir, cacheDir, model, keys, raw: await readAllRaw(files) };
}

// The other half of the rule: a single binding not recorded from local files only stays trusted.
for (const recordedWith of ['no stamp', 'an object stamp'] as const) {
  it(`a stampless model at a single binding with ${recordedWith}: served from the cache, cached (as before)`, async () => {
    const { cacheDir, model, keys, raw } = await stamplessBuilt(revisionA());
    const slice = model.getTensor(name(2))!.slice;
    if (recordedWith === 'an object stamp') {
      const store = await openCacheStore(cacheDir, { sliceBindingsPerFile: true });
      try {
        expect(await store.aliasSlices([{ key: keys.get(name(2))!, ...slice, stamp: `${OBJECT_STAMP_PREFIX}"0123abcd"` }])).toEqual([true]);
      } finally {
        await store.close();
      }
    }
    const cache = await openShardCache(cacheDir);
    try {
      const bindings = cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes);
      expect(bindings.map((binding) => binding.stamps)).toEqual([recordedWith === 'no stamp' ? [] : [`${OBJECT_STAMP_PREFIX}"0123abcd"`]]);
      for (const cacheOnly of [false, true]) {
        const t = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu', cacheOnly });
        expect(sameBytes(t.data, raw.get(name(2))!)).toBe(true);
        expect(t).toMatchObject({ source: 'cache', reason: 'cached' });
      }
    } finally {
      await cache.close();
    }
  });
}

it("a stampless model whose tensor has another shape than the entry of the slice's one file binding: stale unhashed (was missing, 'no entry for this slice'); cacheOnly NOT_CACHED 'stale'", async () => {
  const { dir, cleanup } = await makeTempDir('stampless-file-binding-');
  cleanups.push(cleanup);
  const a = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const c = await writeModel(join(dir, 'C'), reshaped(), 80 * 1024);
  cleanups.push(() => a.close(), () => c.close());
  const cacheDir = join(dir, 'cache');
  await buildCache(a, cacheDir, { sliceBindingsPerFile: true });
  const rawC = await readAllRaw(c);
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'C')) });
  cleanups.push(() => model.close());
  expect(model.getTensor(name(2))!.slice).toEqual(a.getTensor(name(2))!.slice);
  const cache = await openShardCache(cacheDir);
  try {
    const t = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
    expect(sameBytes(t.data, rawC.get(name(2))!)).toBe(true);
    expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
    expect(t.report.detail).toMatch(/\(no stamp\) holds other bytes than the entry its slice is bound to \(its entry is a tensor of another shape: not this \[32,128\] one/);
    expect(t.report.detail).toMatch(/a build of this revision binds the tensor beside that binding/);
    expect(t.report.detail).not.toMatch(/objectSources|gc <cache> --model/);
    const error = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu', cacheOnly: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: name(2), reason: 'stale' } });
    expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0 });
  } finally {
    await cache.close();
  }
});

it('a stampless model whose tensor has another shape than every entry of the slice\'s several bindings: stale unhashed (was missing)', async () => {
  const { dir, cleanup } = await makeTempDir('stampless-file-binding-');
  cleanups.push(cleanup);
  const a = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  const b = await writeModel(join(dir, 'B'), revisionB(), 80 * 1024);
  const c = await writeModel(join(dir, 'C'), reshaped(), 80 * 1024);
  cleanups.push(() => a.close(), () => b.close(), () => c.close());
  const cacheDir = join(dir, 'cache');
  await buildCache(a, cacheDir, { sliceBindingsPerFile: true });
  await buildCache(b, cacheDir, { sliceBindingsPerFile: true });
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'C')) });
  cleanups.push(() => model.close());
  const cache = await openShardCache(cacheDir);
  try {
    const slice = model.getTensor(name(2))!.slice;
    expect(cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(2);
    const t = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
    expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
    expect(t.report.detail).toMatch(/\(no stamp\) holds other bytes than any of the 2 entries its slice is bound to \(one binding per file\) \(each entry is a tensor of another shape/);
    const error = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu', cacheOnly: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'NOT_CACHED', details: { reason: 'stale' } });
  } finally {
    await cache.close();
  }
});
