// MAX_SLICE_BINDINGS eviction ranks the new binding with the others (review of f4348db): the binding
// whose file changed least recently (newest file-stamp ctime) goes, the new one included. When that
// is the new one, nothing changes: aliasSlices answers false, addEntries adds the entry without that
// slice, nothing is journalled for it, and the drop is reported with the new key.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore, type SliceKeyTuple } from '../src/index.js';
import { makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
/** makeUnboundCache's first seed here (the keys, whose order breaks ties, these cases were written against). */
const FIRST_SEED = 300;
/** A file stamp of revision `n` (its own inode and mtime) whose ctime is `ctime` (1..9999). */
const fileStamp = (n: number, ctime: number): string => `9000:17334000000000000${10 + n}:173340000000000${String(ctime).padStart(4, '0')}:${100 + n}`;
/** The ctimes of the eight bindings there first: all newer than the late one's. */
const FIRST_CTIMES = Array.from({ length: MAX_SLICE_BINDINGS }, (_, i) => 51 + i);
const OLD_CTIME = 1;

const alias = (key: string, stamp: string) => ({ key, ...SLICE, stamp });
const keysOf = (store: CacheStore): string[] => store.lookupSliceBindings(SHARD, 0, 480).map((b) => b.entry.key);

/** A store holding MAX_SLICE_BINDINGS bindings of SLICE (entries 0..7, ctimes 51..58), latest first. */
async function fillSlice(store: CacheStore, tensors: readonly TestTensor[]): Promise<string[]> {
  for (const [i, ctime] of FIRST_CTIMES.entries()) expect(await store.aliasSlices([alias(tensors[i]!.key, fileStamp(i, ctime))])).toEqual([true]);
  const expected = FIRST_CTIMES.map((_, i) => tensors[i]!.key).reverse();
  expect(keysOf(store)).toEqual(expected);
  return expected;
}

describe('a ninth binding ranked with the eight', () => {
  it('aliasSlices of a file older than all eight: false, reported with its own key, nothing journalled; the same after reopening', async () => {
    const { root, tensors } = await makeUnboundCache(MAX_SLICE_BINDINGS + 1, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    const before = await fillSlice(store, tensors);
    const generation = store.generation;
    const journalBytes = (await stat(join(root, `journal.${generation}`))).size;
    const late = tensors[MAX_SLICE_BINDINGS]!;
    const dropped: [SliceKeyTuple, string][] = [];
    const result = await store.aliasSlices([alias(late.key, fileStamp(MAX_SLICE_BINDINGS, OLD_CTIME))], { onBindingDropped: (slice, key) => dropped.push([slice, key]) });
    expect(result).toEqual([false]);
    expect(dropped).toEqual([[[SHARD, 0, 480], late.key]]);
    // The ctime-51 binding (entry 0) stays; the late one is not bound.
    expect(keysOf(store)).toEqual(before);
    expect(store.getEntry(late.key)?.sliceKeys).toEqual([]);
    expect(store.getEntry(tensors[0]!.key)?.sliceKeys).toHaveLength(1);
    expect(store.generation).toBe(generation);
    expect((await stat(join(root, `journal.${generation}`))).size).toBe(journalBytes);
    await store.close();
    const again = await openCacheStore(root);
    expect(keysOf(again)).toEqual(before);
    await again.close();
  });

  it('a ninth binding newer than one of the eight still takes its place (the least recent of all goes)', async () => {
    const { root, tensors } = await makeUnboundCache(MAX_SLICE_BINDINGS + 1, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    const before = await fillSlice(store, tensors);
    const late = tensors[MAX_SLICE_BINDINGS]!;
    const dropped: string[] = [];
    // Between the oldest two (51, 52): only entry 0 is less recent.
    const result = await store.aliasSlices([alias(late.key, fileStamp(MAX_SLICE_BINDINGS, 52))], { onBindingDropped: (_slice, key) => dropped.push(key) });
    expect(result).toEqual([true]);
    expect(dropped).toEqual([tensors[0]!.key]);
    const expected = new Set([...before.filter((key) => key !== tensors[0]!.key), late.key]);
    expect(new Set(keysOf(store))).toEqual(expected);
    const order = keysOf(store);
    await store.close();
    const again = await openCacheStore(root);
    expect(keysOf(again)).toEqual(order);
    await again.close();
  });

  it('addEntries of a file older than all eight: the entry is added without that slice (slicesBound 0), droppedBindings names it; replay agrees', async () => {
    const { root, tensors } = await makeUnboundCache(MAX_SLICE_BINDINGS, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    const before = await fillSlice(store, tensors);
    const late = makeTensor([40, 6], 900);
    const [result] = await store.addEntries([toInput(late, 'late.weight', [[SHARD, 0, 480, [fileStamp(MAX_SLICE_BINDINGS, OLD_CTIME)]]])]);
    expect(result).toEqual({ key: late.key, added: true, slicesBound: 0, droppedBindings: [{ slice: [SHARD, 0, 480], key: late.key }] });
    expect(store.getEntry(late.key)?.sliceKeys).toEqual([]);
    expect(keysOf(store)).toEqual(before);
    await store.close();
    // From the journal (compactOnClose off), then from a compacted manifest.
    for (const compact of [false, true]) {
      const again = await openCacheStore(root, { compactOnClose: compact });
      expect(again.getEntry(late.key)?.sliceKeys).toEqual([]);
      expect(keysOf(again)).toEqual(before);
      await again.close();
    }
  });
});
