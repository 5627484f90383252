// AliasSliceItem.moveFrom on a handle binding per file (review of 736a928): a moveFrom naming this
// file's binding from before it changed in place (its inode, other bytes) moves that binding in one
// op, although a binding beside it would be allowed. Before, the store added beside and a builder
// unbound the stale one after: the cache went to format 3 and back, a crash between left both, and
// at MAX_SLICE_BINDINGS the add evicted another file's live binding before the stale one went.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore } from '../src/index.js';
import { removeTempDirs, type TestTensor } from './helpers.js';
import { makeUnboundCache } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
/** makeUnboundCache's first seed here (the keys, whose order breaks ties, these cases were written against). */
const FIRST_SEED = 700;
/** A file stamp of inode `inode` whose ctime is `ctime` (1..9999). */
const fileStamp = (inode: number, ctime: number): string => `9000:1733400000000000${String(ctime).padStart(4, '0')}:173340000000000${String(ctime).padStart(4, '0')}:${inode}`;
const alias = (key: string, stamp: string, moveFrom?: string) => ({ key, ...SLICE, stamp, ...(moveFrom === undefined ? {} : { moveFrom }) });
const bindingsOf = (store: CacheStore) => store.lookupSliceBindings(SHARD, 0, 480).map((b) => ({ key: b.entry.key, stamps: [...b.stamps] }));
const manifestFormat = async (root: string): Promise<number> => (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number }).format;

describe('moveFrom moves this file\'s stale binding where a binding beside would be allowed', () => {
  it('the only binding (format 2): moved, the cache never holds two, format 2 after closing and after a replay', async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [stale, fresh] = tensors as [TestTensor, TestTensor];
    let store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    expect(await store.aliasSlices([alias(stale.key, fileStamp(42, 10))])).toEqual([true]);
    // The file rewritten in place: same inode 42, a newer ctime, other bytes.
    expect(await store.aliasSlices([alias(fresh.key, fileStamp(42, 20), stale.key)])).toEqual([true]);
    expect(bindingsOf(store)).toEqual([{ key: fresh.key, stamps: [fileStamp(42, 20)] }]);
    expect(store.getEntry(stale.key)?.sliceKeys).toEqual([]);
    await store.close();
    // Reopened without compaction: the journal replays the same move.
    store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect(bindingsOf(store)).toEqual([{ key: fresh.key, stamps: [fileStamp(42, 20)] }]);
    await store.close();
    expect(await manifestFormat(root)).toBe(2);
  });

  it("beside another file's binding: only the stale one moves, the other file's stays, also after a replay", async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [stale, other, fresh] = tensors as [TestTensor, TestTensor, TestTensor];
    let store = await openCacheStore(root, { sliceBindingsPerFile: true, compactOnClose: false });
    expect(await store.aliasSlices([alias(other.key, fileStamp(7, 5))])).toEqual([true]);
    expect(await store.aliasSlices([alias(stale.key, fileStamp(42, 10))])).toEqual([true]);
    expect(await store.aliasSlices([alias(fresh.key, fileStamp(42, 20), stale.key)])).toEqual([true]);
    const expected = [
      { key: fresh.key, stamps: [fileStamp(42, 20)] },
      { key: other.key, stamps: [fileStamp(7, 5)] },
    ];
    expect(bindingsOf(store)).toEqual(expected);
    await store.close();
    store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect(bindingsOf(store)).toEqual(expected);
    await store.close();
  });

  it('at MAX_SLICE_BINDINGS: the stale binding is the one replaced, no live binding dropped', async () => {
    const { root, tensors } = await makeUnboundCache(MAX_SLICE_BINDINGS + 1, FIRST_SEED);
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    // Seven other files (ctimes 1..7: all older than the stale one) and this file's stale binding.
    for (let i = 0; i < MAX_SLICE_BINDINGS - 1; i++) expect(await store.aliasSlices([alias(tensors[i]!.key, fileStamp(100 + i, 1 + i))])).toEqual([true]);
    const stale = tensors[MAX_SLICE_BINDINGS - 1]!;
    const fresh = tensors[MAX_SLICE_BINDINGS]!;
    expect(await store.aliasSlices([alias(stale.key, fileStamp(42, 10))])).toEqual([true]);
    const dropped: string[] = [];
    expect(await store.aliasSlices([alias(fresh.key, fileStamp(42, 20), stale.key)], { onBindingDropped: (_slice, key) => dropped.push(key) })).toEqual([true]);
    expect(dropped).toEqual([]);
    const keys = bindingsOf(store).map((b) => b.key);
    expect(keys).toHaveLength(MAX_SLICE_BINDINGS);
    expect(keys[0]).toBe(fresh.key);
    expect(keys).not.toContain(stale.key);
    for (let i = 0; i < MAX_SLICE_BINDINGS - 1; i++) expect(keys).toContain(tensors[i]!.key);
    await store.close();
  });

  it("a moveFrom naming another file's only binding (another inode) moves nothing: bound beside, as without it", async () => {
    const { root, tensors } = await makeUnboundCache(2, FIRST_SEED);
    const [other, fresh] = tensors as [TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect(await store.aliasSlices([alias(other.key, fileStamp(7, 5))])).toEqual([true]);
    expect(await store.aliasSlices([alias(fresh.key, fileStamp(42, 20), other.key)])).toEqual([true]);
    expect(bindingsOf(store).map((b) => b.key)).toEqual([fresh.key, other.key]);
    await store.close();
  });

  it("a moveFrom naming one of other files' bindings (other inodes, several) moves nothing: bound beside, as without it", async () => {
    const { root, tensors } = await makeUnboundCache(3, FIRST_SEED);
    const [other, another, fresh] = tensors as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(root, { sliceBindingsPerFile: true });
    expect(await store.aliasSlices([alias(other.key, fileStamp(7, 5))])).toEqual([true]);
    expect(await store.aliasSlices([alias(another.key, fileStamp(8, 6))])).toEqual([true]);
    expect(await store.aliasSlices([alias(fresh.key, fileStamp(42, 20), other.key)])).toEqual([true]);
    expect(bindingsOf(store).map((b) => b.key)).toEqual([fresh.key, another.key, other.key]);
    await store.close();
  });
});
