// A shard with no stamp (a ByteSource without an ETag, a caller's model whose shard stamp is null)
// at a slice whose ONE binding was recorded only from local files (their stamps) may be another
// revision's binding: this revision's entry unbound (a tensor a build skipped or did not bind, an
// unbind, an eviction). Served unchecked, it gave revision A's bytes to a model of revision B,
// reported `cached`. Checked at every load instead, as at a slice with several bindings;
// objectSources 'trust' serves it unchecked as before.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel, type ByteSource } from '@splitzip/safetensors';
import { afterAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
const revisionA = (): FixtureTensor[] => Array.from({ length: 4 }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 100 + k) }));
/** A with layer 2 changed. */
const revisionB = (): FixtureTensor[] => revisionA().map((t, k) => (k === 2 ? { ...t, data: bf16Weights(4096, 999) } : t));

/** A model directory as a ByteSource whose objects have no ETag: its shards have no stamp. */
async function stamplessSource(dir: string): Promise<ByteSource> {
  const names = await readdir(dir);
  return {
    url: `mem://${dir}/`,
    list: async () => names,
    open: async (file) => {
      if (!names.includes(file)) return undefined;
      const bytes = await readFile(join(dir, file));
      return { sizeBytes: bytes.length, readInto: async (offset: number, target: Uint8Array) => target.set(bytes.subarray(offset, offset + target.length)) };
    },
  };
}

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
  const trusting = await openShardCache(cacheDir, { objectSources: 'trust' });
  try {
    const t = await loadTensor({ model, name: name(2) }, { cache: trusting, backend: 'cpu', cacheOnly: true });
    expect(sameBytes(t.data, rawA.get(name(2))!)).toBe(true);
    expect(t).toMatchObject({ source: 'cache', reason: 'cached' });
  } finally {
    await trusting.close();
  }
});
