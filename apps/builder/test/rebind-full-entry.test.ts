// `build --rebind` of a shard changed in place, where a tensor's new bytes are those of an entry
// that holds MAX_SLICE_KEYS_PER_ENTRY bindings already: the slice cannot move to that entry, and
// its binding to the entry of the old bytes was left in place (the report said `unaliased`, verify
// failed it as stale, and only the loaders' stamp check kept them from serving the old bytes). The
// build now removes that binding (the store's unbindSlices). The full entry is made cheaply: one
// tensor built, the rest of its bindings added with one aliasSlices call on made-up slices.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type * as Store from '@splitzip/store';
import { MAX_SLICE_KEYS_PER_ENTRY, openCacheStore, type CacheStore, type UnbindSliceItem } from '@splitzip/store';
import { buildCache, type BuildReport } from '../src/build-cache.js';
import { renderBuildReport } from '../src/commands/build.js';
import { createCommitBatcher } from '../src/create-commit-batcher.js';
import { verifyModelCache } from '../src/verify-model-cache.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';

const seen = vi.hoisted(() => ({
  /**
   * The build's store answers slice lookups with nothing until it looks at a cached blob
   * (checkBlob): as if another writer bound the slice after the build's conflict check looked.
   */
  hideSlices: false,
  /** Run before the build's unbindSlices call: another writer acting after the build looked. */
  beforeUnbind: undefined as (() => Promise<void>) | undefined,
}));

vi.mock('@splitzip/store', async (importOriginal) => {
  const { mockStoreModule } = await import('./helpers/intercept-store.js');
  return mockStoreModule(await importOriginal<typeof Store>(), (property, target) => {
    if (property === 'lookupBySlice' && seen.hideSlices) return () => undefined;
    if (property === 'lookupSliceBindings' && seen.hideSlices) return () => [];
    if (property === 'checkBlob' && seen.hideSlices) {
      return (key: string) => {
        seen.hideSlices = false;
        return target.checkBlob(key);
      };
    }
    const beforeUnbind = seen.beforeUnbind;
    if (property === 'unbindSlices' && beforeUnbind) {
      return async (items: readonly UnbindSliceItem[]) => {
        seen.beforeUnbind = undefined;
        await beforeUnbind();
        return target.unbindSlices(items);
      };
    }
    return undefined;
  });
});

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

// Large enough that a payload is smaller than the raw bytes (the build stores no others).
const VALUES = 2048;
/** 2048 BF16 1.0 values: the bytes of the full entry. */
function onesTensor(name: string): TensorData {
  const data = new Uint8Array(2 * VALUES);
  for (let i = 0; i < VALUES; i++) data.set([0x80, 0x3f], 2 * i);
  return { name, dtype: 'BF16', shape: [VALUES], data };
}

interface Fixture {
  cacheDir: string;
  modelPath: string;
  onesKey: string;
  /** The entry a.weight's bytes had before the file changed, and a.weight's slice. */
  oldKey: string;
  slice: { shardName: string; offsetBytes: number; sizeBytes: number };
}

/**
 * A cache whose all-ones entry holds MAX_SLICE_KEYS_PER_ENTRY bindings, and model.safetensors built
 * into it, then rewritten in place (the same inode: this file's binding is in the way; a new file by a
 * rename would be another file, bound beside since 0.56) with a.weight's bytes all ones (b.weight unchanged).
 */
async function prepare(name: string): Promise<Fixture> {
  const dir = join(temp.path, name);
  const cacheDir = join(dir, 'cache');
  await mkdir(dir);
  const filler = await buildCache({ model: await writeSingleFileModel(join(dir, 'filler.safetensors'), [onesTensor('ones')]), cacheDir, jobs: 0 });
  const onesKey = filler.tensors[0]!.key!;
  const store = await openCacheStore(cacheDir);
  const sizeBytes = 2 * VALUES;
  const copies = Array.from({ length: MAX_SLICE_KEYS_PER_ENTRY - 1 }, (_, i) => ({ key: onesKey, shardName: 'copies.safetensors', offsetBytes: sizeBytes * i, sizeBytes }));
  expect((await store.aliasSlices(copies)).every(Boolean)).toBe(true);
  expect(store.getEntry(onesKey)!.sliceKeys).toHaveLength(MAX_SLICE_KEYS_PER_ENTRY);
  await store.close();

  const modelPath = join(dir, 'model.safetensors');
  const b = gaussianBf16('b.weight', [VALUES], 12);
  await writeSingleFileModel(modelPath, [gaussianBf16('a.weight', [VALUES], 11), b]);
  const first = await buildCache({ model: modelPath, cacheDir, jobs: 0 });
  expect(first).toMatchObject({ encoded: 2, aliased: 2, unaliased: 0 });
  const a = first.tensors.find((t) => t.name === 'a.weight')!;
  // Same shape and dtype: the header, and so a.weight's slice, stay as they were.
  const next = await writeSingleFileModel(join(dir, 'next.safetensors'), [onesTensor('a.weight'), b]);
  await writeFile(modelPath, await readFile(next));
  return { cacheDir, modelPath, onesKey, oldKey: a.key!, slice: { shardName: a.shard, offsetBytes: a.offsetBytes, sizeBytes: a.sizeBytes } };
}

async function withStore<T>(cacheDir: string, use: (store: CacheStore) => Promise<T> | T): Promise<T> {
  const store = await openCacheStore(cacheDir);
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}

function tensorOf(report: BuildReport, name: string): BuildReport['tensors'][number] {
  return report.tensors.find((t) => t.name === name)!;
}

describe('build --rebind onto an entry with MAX_SLICE_KEYS_PER_ENTRY bindings', () => {
  it('leaves the slice unbound and removes its binding to the old bytes (it was left bound to them); verify then says not cached, not stale', async () => {
    const { cacheDir, modelPath, onesKey, oldKey, slice } = await prepare('rebind');
    // Without --rebind the changed slice is refused, as before: nothing of the tensor is written.
    await expect(buildCache({ model: modelPath, cacheDir, jobs: 0 })).rejects.toMatchObject({ code: 'SLICE_CONFLICT' });

    const report = await buildCache({ model: modelPath, cacheDir, jobs: 0, rebindSlices: true });
    await withStore(cacheDir, async (store) => {
      // It was left bound to the old entry.
      expect(store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toBeUndefined();
      // The old entry stays (found by content key, its blob kept); only the binding went.
      expect(store.getEntry(oldKey)!.sliceKeys).toEqual([]);
      expect(store.getEntry(onesKey)!.sliceKeys).toHaveLength(MAX_SLICE_KEYS_PER_ENTRY);
      const verify = await verifyModelCache(store, modelPath, { coverageMin: store.coverageMin });
      expect(verify.totals).toMatchObject({ ok: 1, not_cached: 1, failed: 0 });
      expect(verify.tensors.find((t) => t.name === 'a.weight')).toMatchObject({ status: 'not_cached', reason: expect.stringContaining('MAX_SLICE_KEYS_PER_ENTRY') });
    });
    expect(tensorOf(report, 'a.weight')).toMatchObject({ status: 'cached', key: onesKey, unaliased: true, unboundFrom: oldKey });
    expect(tensorOf(report, 'b.weight').unboundFrom).toBeUndefined();
    expect(report).toMatchObject({ encoded: 0, cached: 2, unaliased: 1, unbound_stale: 1 });
    const text = renderBuildReport(report, { tensors: true });
    // Past 120 columns the line goes on under its value (8 columns in).
    expect(text.replace(/\n {8}/g, ' ')).toContain('; 1 of them left unbound (served raw: MAX_SLICE_KEYS_PER_ENTRY identical tensors bound already), their 1 stale binding to other bytes removed');
    expect(text).toMatch(/a\.weight .* cached, unbound \(stale binding removed\)/);

    // A re-run finds nothing to remove: still unbound, nothing written.
    const again = await buildCache({ model: modelPath, cacheDir, jobs: 0, rebindSlices: true });
    expect(again).toMatchObject({ unaliased: 1, unbound_stale: 0, aliased: 0, stored_bytes: 0 });
    expect(tensorOf(again, 'a.weight').unboundFrom).toBeUndefined();
  });

  it('a slice another writer moved to a third entry before the removal keeps that binding and is not reported as removed (it was: unboundFrom, unbound_stale 1)', async () => {
    const { cacheDir, modelPath, oldKey, slice } = await prepare('moved-meanwhile');
    let thirdKey = '';
    // Another writer's --rebind (b.weight's bytes are another model's at this slice) moves it off the old entry.
    seen.beforeUnbind = () =>
      withStore(cacheDir, async (other) => {
        thirdKey = [...other.entries()].find((entry) => entry.key !== oldKey && entry.rawBytes === slice.sizeBytes && entry.sliceKeys.length === 1)!.key;
        expect(await other.aliasSlices([{ key: thirdKey, ...slice }], { rebind: true })).toEqual([true]);
      });
    let report: BuildReport;
    try {
      report = await buildCache({ model: modelPath, cacheDir, jobs: 0, rebindSlices: true });
    } finally {
      seen.beforeUnbind = undefined;
    }
    expect(thirdKey).not.toBe('');
    await withStore(cacheDir, (store) => expect(store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.key).toBe(thirdKey));
    expect(tensorOf(report, 'a.weight')).toMatchObject({ status: 'cached', unaliased: true });
    expect(tensorOf(report, 'a.weight').unboundFrom).toBeUndefined();
    expect(report).toMatchObject({ unaliased: 1, unbound_stale: 0 });
    expect(renderBuildReport(report, { tensors: true })).not.toContain('stale binding');
  });

  it('without --rebind, a slice another writer bound to other bytes after the build looked is SLICE_CONFLICT (was left bound, the tensor reported unaliased), and that binding stays', async () => {
    const { cacheDir, modelPath, oldKey, slice } = await prepare('no-rebind');
    seen.hideSlices = true;
    try {
      await expect(buildCache({ model: modelPath, cacheDir, jobs: 0 })).rejects.toMatchObject({ code: 'SLICE_CONFLICT', context: { tensor: 'a.weight' } });
    } finally {
      seen.hideSlices = false;
    }
    await withStore(cacheDir, (store) => expect(store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.key).toBe(oldKey));
  });
});

describe('the commit batcher removes bindings in batches', () => {
  it.each([
    ['moved to another entry by another writer', { key: 'd'.repeat(40) }],
    ['removed first by another writer (a concurrent build of this model)', undefined],
  ])('a binding the store call did not remove answers false: %s (answered true)', async (_, boundAfter) => {
    const store = {
      unbindSlices: async () => 0,
      lookupBySlice: () => boundAfter,
      lookupSliceBindings: () => (boundAfter === undefined ? [] : [{ entry: boundAfter, stamps: [] }]),
    } as unknown as CacheStore;
    for (const batch of [false, true]) {
      const commits = createCommitBatcher(store, { rebind: true, batch });
      expect(await commits.unbindSlice({ key: 'a'.repeat(40), shardName: 's', offsetBytes: 0, sizeBytes: 2 })).toBe(false);
    }
  });

  it.each([false, true])('unbind calls made while one runs go into one store call (batch: %s); each answers whether its binding is gone', async (batch) => {
    const bound = new Map([
      ['s:0', 'a'.repeat(40)],
      ['s:2', 'b'.repeat(40)],
      ['s:4', 'c'.repeat(40)],
    ]);
    const calls: UnbindSliceItem[][] = [];
    const store = {
      unbindSlices: async (items: readonly UnbindSliceItem[]) => {
        calls.push([...items]);
        await new Promise((resolve) => setTimeout(resolve, 20));
        let removed = 0;
        for (const item of items) {
          const id = `${item.shardName}:${item.offsetBytes}`;
          // s:4: another writer bound it to that entry again before the call returned.
          if (bound.get(id) === item.key && id !== 's:4' && bound.delete(id)) removed++;
        }
        return removed;
      },
      lookupBySlice: (shardName: string, offsetBytes: number) => {
        const key = bound.get(`${shardName}:${offsetBytes}`);
        return key === undefined ? undefined : { key };
      },
      lookupSliceBindings: (shardName: string, offsetBytes: number) => {
        const key = bound.get(`${shardName}:${offsetBytes}`);
        return key === undefined ? [] : [{ entry: { key }, stamps: [] }];
      },
    } as unknown as CacheStore;
    const commits = createCommitBatcher(store, { rebind: true, batch });
    const first = commits.unbindSlice({ key: 'a'.repeat(40), shardName: 's', offsetBytes: 0, sizeBytes: 2 });
    // The first call runs: these wait for it, then go together.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const rest = [
      commits.unbindSlice({ key: 'b'.repeat(40), shardName: 's', offsetBytes: 2, sizeBytes: 2 }),
      commits.unbindSlice({ key: 'c'.repeat(40), shardName: 's', offsetBytes: 4, sizeBytes: 2 }),
    ];
    expect(await Promise.all([first, ...rest])).toEqual([true, true, false]);
    expect(calls.map((items) => items.length)).toEqual([1, 2]);
    expect(bound).toEqual(new Map([['s:4', 'c'.repeat(40)]]));
  });
});
