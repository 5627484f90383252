// A shard with no stamp (a ByteSource without an ETag) names no file, so no binding of a slice that
// has several (revisions side by side in a local cache, one binding per file) is its own: the
// latest is another revision's bytes. Such a tensor is checked against every binding at every load
// and nothing is recorded; objectSources 'trust' picks none of them either. A slice with a single
// binding recorded only from files is checked too (stampless-file-binding.test.ts).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel, type ByteSource } from '@splitzip/safetensors';
import { afterAll, expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, objectSource, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
const revisionA = (): FixtureTensor[] => Array.from({ length: 4 }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 100 + k) }));
/** A with layer 2 changed: its slice gets two bindings (A's entry, B's entry), the others one. */
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

async function revisionsInOneCache() {
  const { dir, cleanup } = await makeTempDir('stampless-bindings-');
  cleanups.push(cleanup);
  const a = await writeModel(join(dir, 'A'), revisionA(), 80 * 1024);
  await new Promise((resolve) => setTimeout(resolve, 20)); // B's file changed later (its binding is the latest)
  const b = await writeModel(join(dir, 'B'), revisionB(), 80 * 1024);
  const cacheDir = join(dir, 'cache');
  await buildCache(a, cacheDir, { sliceBindingsPerFile: true });
  await buildCache(b, cacheDir, { sliceBindingsPerFile: true });
  const raw = await readAllRaw(a);
  cleanups.push(async () => {
    await a.close();
    await b.close();
  });
  return { dir, cacheDir, raw };
}

it("a stampless shard at a slice with several bindings: A's bytes, checked at every load, nothing recorded; one binding of files: checked too", async () => {
  const { dir, cacheDir, raw } = await revisionsInOneCache();
  const cache = await openShardCache(cacheDir);
  const model = await openSafetensorsModel({ source: await stamplessSource(join(dir, 'A')) });
  try {
    expect(model.shards[0]!.stamp ?? null).toBeNull();
    const slice = model.getTensor(name(2))!.slice;
    expect(cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(2);
    for (let load = 0; load < 2; load++) {
      const changed = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
      expect(sameBytes(changed.data, raw.get(name(2))!)).toBe(true);
      expect(changed).toMatchObject({ source: 'raw', reason: 'unchecked' });
      expect(changed.report.detail).toMatch(/no stamp\) checked: its bytes are entry .* one of the 2 bindings of its slice .*checked at every load/);
    }
    // One binding, recorded from A's and B's files only: checked too (stampless-file-binding.test.ts).
    const same = await loadTensor({ model, name: name(1) }, { cache, backend: 'cpu' });
    expect(same).toMatchObject({ source: 'raw', reason: 'unchecked' });
    expect(sameBytes(same.data, raw.get(name(1))!)).toBe(true);
    expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0 });
  } finally {
    await model.close();
    await cache.close();
  }
});

it("objectSources 'trust' picks no binding of a slice with several: A's bytes are checked and its ETag recorded with A's binding", async () => {
  const { dir, cacheDir, raw } = await revisionsInOneCache();
  for (const round of ['checked', 'recorded'] as const) {
    const cache = await openShardCache(cacheDir, { objectSources: 'trust' });
    const model = await openSafetensorsModel({ source: await objectSource(join(dir, 'A'), 'etag-a') });
    try {
      const changed = await loadTensor({ model, name: name(2) }, { cache, backend: 'cpu' });
      expect(sameBytes(changed.data, raw.get(name(2))!)).toBe(true);
      expect(changed).toMatchObject(round === 'checked' ? { source: 'raw', reason: 'unchecked' } : { source: 'cache', reason: 'cached' });
      await cache.flushObjectStamps!();
    } finally {
      await model.close();
      await cache.close();
    }
  }
});
