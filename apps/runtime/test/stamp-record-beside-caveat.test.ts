// A long-lived handle whose view still holds a file's own binding (beside another file's) that
// another process removed since (gc --model A --prune-other-files) and compacted to format 2: a copy
// of that file checks `unchecked` against it, and its stamp record, binding beside A's at commit, is
// refused by the store (besideOnlyIfSeveral: keptFormatBindings). The detail said only "its stamp is
// being recorded with the binding for other processes" (a user's probe, ll.mjs); it now carries the
// caveat the beside case has. A slice whose only binding is the checked one gets no caveat.
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel } from './fixtures.js';
import { manifestFormat, name, revisionB, useCleanups, writeRevisions } from './helpers/two-revisions.js';

const cleanups = useCleanups();

it("a copy of B checked against B's binding that gc removed since this handle looked: the detail says the record binds beside only if a second binding is still held", async () => {
  const { dir, A, B, cacheDir } = await writeRevisions('splitzip-beside-caveat-', cleanups);
  // A fresh copy of B: the same bytes and layout, another inode (its stamp is in no binding).
  const B2 = await writeModel(join(dir, 'B2'), revisionB(), 80 * 1024);
  cleanups.push(() => B2.close());
  await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
  await buildCache(B, cacheDir, { sliceBindingsPerFile: true });
  expect(await manifestFormat(cacheDir)).toBe(3);
  const slice = B.getTensor(name(2))!.slice;
  const bStamp = B.shards[0]!.stamp!;

  const cache = await openShardCache(cacheDir);
  cleanups.push(() => cache.close());
  const bKey = cache.store.lookupSliceBindings(slice.shardName, slice.offsetBytes, slice.sizeBytes).find((b) => b.stamps.includes(bStamp))!.entry.key;
  // Another process removes B's binding beside A's (what gc --model A --prune-other-files does): format 2.
  const other = await openCacheStore(cacheDir, { sliceBindingsPerFile: true });
  try {
    expect(await other.unbindSlices([{ ...slice, key: bKey }])).toBe(1);
    expect(other.holdsSeveralBindings).toBe(false);
  } finally {
    await other.close();
  }
  expect(await manifestFormat(cacheDir)).toBe(2);

  const raw = await readAllRaw(B2);
  const changed = await loadTensor({ model: B2, name: name(2) }, { cache, backend: 'cpu' });
  expect(sameBytes(changed.data, raw.get(name(2))!)).toBe(true);
  expect(changed).toMatchObject({ reason: 'unchecked' });
  expect(changed.report.detail).toContain(
    "its stamp is being recorded with the binding for other processes (should this binding be gone when the record commits, removed by `gc --model` since this cache handle looked, it is added beside the slice's other bindings only if the cache holds a second binding of some slice when the record commits, else not recorded",
  );
  // Its slice's one binding (A's and B's files share the entry): nothing to bind beside.
  const shared = await loadTensor({ model: B2, name: name(0) }, { cache, backend: 'cpu' });
  expect(shared).toMatchObject({ reason: 'unchecked' });
  expect(shared.report.detail).toMatch(/its stamp is being recorded with the binding for other processes$/);
  expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 1, failed: 0, keptFormatBindings: 1 });
  expect(await manifestFormat(cacheDir)).toBe(2);
});

it("a move off another file's binding (B: A's two tensors swapped, its y on A's x span) binds beside it: the detail says so, with the caveat", async () => {
  const { dir, cleanup } = await makeTempDir('splitzip-beside-caveat-move-');
  cleanups.push(cleanup);
  const [x, y] = [bf16Weights(4096, 501), bf16Weights(4096, 502)];
  const A = await writeModel(join(dir, 'A'), [{ name: 'x.weight', dtype: 'BF16', shape: [64, 64], data: x }, { name: 'y.weight', dtype: 'BF16', shape: [64, 64], data: y }], 80 * 1024);
  const B = await writeModel(join(dir, 'B'), [{ name: 'y.weight', dtype: 'BF16', shape: [64, 64], data: y }, { name: 'x.weight', dtype: 'BF16', shape: [64, 64], data: x }], 80 * 1024);
  cleanups.push(() => A.close(), () => B.close());
  const cacheDir = join(dir, 'cache');
  await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
  const cache = await openShardCache(cacheDir);
  cleanups.push(() => cache.close());
  const raw = await readAllRaw(B);
  const t = await loadTensor({ model: B, name: 'y.weight' }, { cache, backend: 'cpu' });
  expect(sameBytes(t.data, raw.get('y.weight')!)).toBe(true);
  expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
  // It said the slice was moved from A's entry and the binding "being recorded": the store moves
  // nothing off another file's binding, and refuses a binding beside it in this format-2 cache.
  expect(t.report.detail).toContain("to which this file's binding of the slice is added beside entry");
  expect(t.report.detail).toContain("another file's (one binding per file: nothing is moved)");
  expect(t.report.detail).toContain(
    "the binding is being recorded for other processes (added only if the cache holds a second binding of some slice when the record commits, else not recorded, the cache keeping its format (flushObjectStamps' keptFormatBindings))",
  );
  expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0, keptFormatBindings: 1 });
  expect(await manifestFormat(cacheDir)).toBe(2);
});
