// AliasSliceItem.besideOnlyIfSeveral: a binding beside other files' is added only where the cache,
// caught up under the writer lock, holds a second binding of some slice now, or the commit being
// made adds one (an earlier item, a call folded into the same commit); else the item is not
// applied (false, onBesideRefused), nothing written, the format kept. A loader's view of that can
// be stale: another process may have unbound the last second binding and compacted to format 2
// since.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore, type SliceKeyTuple } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const SLICE = { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 0, sizeBytes: 480 };
const OTHER = { shardName: 'other.safetensors', offsetBytes: 0, sizeBytes: 480 };
const fileStamp = (n: number): string => `9000:17334000000000000${10 + n}:17334000000000000${10 + n}:${100 + n}`;

async function manifestFormat(root: string): Promise<number> {
  return (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number }).format;
}

/** Every top-level file's name, size and mtime: what a write would change. */
async function listFiles(root: string): Promise<string[]> {
  const names = (await readdir(root)).sort();
  return Promise.all(names.map(async (name) => {
    const info = await stat(join(root, name));
    return `${name}:${info.isFile() ? info.size : 'dir'}:${info.isFile() ? info.mtimeMs : ''}`;
  }));
}

async function cacheOfTwoEntries() {
  const root = await makeTempDir();
  const [a, b, c] = [makeTensor([40, 6], 100), makeTensor([40, 6], 101), makeTensor([40, 6], 102)];
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
  await store.addEntries([toInput(a, 'w'), toInput(b, 'w'), toInput(c, 'w')]);
  await store.aliasSlices([{ key: a.key, ...SLICE, stamp: fileStamp(1) }]);
  await store.compact();
  return { root, store, a, b, c };
}

it('a format-2 cache: the item beside another file\'s binding is not applied (false, onBesideRefused), nothing written; other items of the call are', async () => {
  const { root, store, a, b, c } = await cacheOfTwoEntries();
  try {
    expect(await manifestFormat(root)).toBe(2);
    const before = await listFiles(root);
    const refused: [SliceKeyTuple, string][] = [];
    const dropped: string[] = [];
    const items = [{ key: b.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true }];
    expect(await store.aliasSlices(items, { onBesideRefused: (slice, key) => refused.push([slice, key]), onBindingDropped: (_slice, key) => dropped.push(key) })).toEqual([false]);
    expect(refused).toEqual([[[SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes], b.key]]);
    expect(dropped).toEqual([]);
    expect(await listFiles(root)).toEqual(before);
    expect(store.holdsSeveralBindings).toBe(false);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key)).toEqual([a.key]);
    // Not beside anything (an unbound slice; a stamp merged into the item's own binding): applied.
    const plain = [
      { key: c.key, ...OTHER, stamp: fileStamp(3), besideOnlyIfSeveral: true },
      { key: a.key, ...SLICE, stamp: fileStamp(4), besideOnlyIfSeveral: true },
    ];
    expect(await store.aliasSlices(plain, { onBesideRefused: (slice, key) => refused.push([slice, key]) })).toEqual([true, true]);
    expect(refused).toHaveLength(1);
    expect(store.holdsSeveralBindings).toBe(false);
    // A binding that breaks the rule (another file's stamp held by the binding in the way) is a conflict still.
    const conflict = await catchError(() => store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(1), besideOnlyIfSeveral: true }]));
    expect(conflict.code).toBe('SLICE_CONFLICT');
  } finally {
    await store.close();
  }
  expect(await manifestFormat(root)).toBe(2);
});

it('a format-3 cache (a second binding of another slice): the item is bound beside', async () => {
  const { root, store, a, b, c } = await cacheOfTwoEntries();
  try {
    await store.aliasSlices([{ key: b.key, ...OTHER, stamp: fileStamp(5) }]);
    await store.aliasSlices([{ key: c.key, ...OTHER, stamp: fileStamp(6) }]);
    expect(await manifestFormat(root)).toBe(3);
    const refused: string[] = [];
    expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true }], { onBesideRefused: (_slice, key) => refused.push(key) })).toEqual([true]);
    expect(refused).toEqual([]);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key).sort()).toEqual([a.key, b.key].sort());
  } finally {
    await store.close();
  }
});

it('decided under the writer lock: a handle that saw a second binding, unbound and compacted to format 2 by another handle since, adds none', async () => {
  const { root, store, b, c } = await cacheOfTwoEntries();
  await store.aliasSlices([{ key: b.key, ...OTHER, stamp: fileStamp(5) }]);
  await store.aliasSlices([{ key: c.key, ...OTHER, stamp: fileStamp(6) }]);
  const other = await openCacheStore(root, { sliceBindingsPerFile: true });
  try {
    expect(store.holdsSeveralBindings).toBe(true);
    expect(await other.unbindSlices([OTHER])).toBe(2);
    expect(await manifestFormat(root)).toBe(2);
    const refused: string[] = [];
    expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true }], { onBesideRefused: (_slice, key) => refused.push(key) })).toEqual([false]);
    expect(refused).toEqual([b.key]);
  } finally {
    await other.close();
    await store.close();
  }
  expect(await manifestFormat(root)).toBe(2);
});

it('a call whose earlier item binds beside (the commit adds the second binding): its besideOnlyIfSeveral item is bound beside too, one format-3 commit', async () => {
  const { root, store, a, b, c } = await cacheOfTwoEntries();
  try {
    await store.aliasSlices([{ key: c.key, ...OTHER, stamp: fileStamp(3) }]);
    await store.compact();
    expect(await manifestFormat(root)).toBe(2);
    const refused: string[] = [];
    const items = [
      { key: b.key, ...OTHER, stamp: fileStamp(5) },
      { key: b.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true },
    ];
    expect(await store.aliasSlices(items, { onBesideRefused: (_slice, key) => refused.push(key) })).toEqual([true, true]);
    expect(refused).toEqual([]);
    expect(await manifestFormat(root)).toBe(3);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key).sort()).toEqual([a.key, b.key].sort());
  } finally {
    await store.close();
  }
});

it('two concurrent calls folded into one commit, the first binding beside: the second\'s besideOnlyIfSeveral item is bound beside too', async () => {
  const { root, store, a, b, c } = await cacheOfTwoEntries();
  const d = makeTensor([40, 6], 103);
  try {
    await store.addEntries([toInput(d, 'w')]);
    await store.aliasSlices([{ key: c.key, ...OTHER, stamp: fileStamp(3) }]);
    await store.compact();
    expect(await manifestFormat(root)).toBe(2);
    const refused: string[] = [];
    // Both calls share the refresh and queue their commits in one turn, before the writer lock is taken: one group commit.
    const [first, second] = await Promise.all([
      store.aliasSlices([{ key: b.key, ...OTHER, stamp: fileStamp(5) }]),
      store.aliasSlices([{ key: d.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true }], { onBesideRefused: (_slice, key) => refused.push(key) }),
    ]);
    expect([first, second]).toEqual([[true], [true]]);
    expect(refused).toEqual([]);
    expect(await manifestFormat(root)).toBe(3);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key).sort()).toEqual([a.key, d.key].sort());
  } finally {
    await store.close();
  }
});

it('decided under the lock, not at the call\'s own refresh: an unbind and compaction to format 2 landing between the two refuses the item', async () => {
  const { root, store, b, c } = await cacheOfTwoEntries();
  await store.aliasSlices([{ key: b.key, ...OTHER, stamp: fileStamp(5) }]);
  await store.aliasSlices([{ key: c.key, ...OTHER, stamp: fileStamp(6) }]);
  const other = await openCacheStore(root, { sliceBindingsPerFile: true });
  // The other handle's unbind lands right after aliasSlices' refresh (its pre-plan still sees the
  // second binding) and before its commit takes the writer lock.
  const refresh = store.refresh.bind(store);
  let unbound: number | undefined;
  store.refresh = async () => {
    await refresh();
    if (unbound === undefined) unbound = await other.unbindSlices([OTHER]);
  };
  try {
    const refused: string[] = [];
    expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2), besideOnlyIfSeveral: true }], { onBesideRefused: (_slice, key) => refused.push(key) })).toEqual([false]);
    expect(unbound).toBe(2);
    expect(refused).toEqual([b.key]);
    expect(store.holdsSeveralBindings).toBe(false);
  } finally {
    await other.close();
    await store.close();
  }
  expect(await manifestFormat(root)).toBe(2);
});

it('besideOnlyIfSeveral must be a boolean; onBesideRefused a function', async () => {
  const { store, b } = await cacheOfTwoEntries();
  try {
    const item = { key: b.key, ...OTHER, besideOnlyIfSeveral: 'yes' as unknown as boolean };
    expect((await catchError(() => store.aliasSlices([item]))).code).toBe('INVALID_ARGUMENT');
    expect((await catchError(() => store.aliasSlices([], { onBesideRefused: 1 as unknown as () => void }))).code).toBe('INVALID_ARGUMENT');
  } finally {
    await store.close();
  }
});

it("a loader's record (moveFrom its own key) without the field, as a caller's store wrapped by the runtime gets it: beside another file's binding it is besideOnlyIfSeveral (false, onBesideRefused), the manifest kept at format 2", async () => {
  const { root, store, a, b } = await cacheOfTwoEntries();
  try {
    expect(await manifestFormat(root)).toBe(2);
    const before = await listFiles(root);
    const refused: string[] = [];
    expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2), moveFrom: b.key }], { onBesideRefused: (_slice, key) => void refused.push(key) })).toEqual([false]);
    expect(refused).toEqual([b.key]);
    expect(await listFiles(root)).toEqual(before);
    expect(store.holdsSeveralBindings).toBe(false);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key)).toEqual([a.key]);
    // Its own binding's stamp is recorded as before.
    expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: fileStamp(5), moveFrom: a.key }])).toEqual([true]);
    await store.compact();
    expect(await manifestFormat(root)).toBe(2);
  } finally {
    await store.close();
  }
});
