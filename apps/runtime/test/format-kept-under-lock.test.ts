// A load binds a file's slice beside another file's only in a cache that holds a second binding
// already (format 3): its first moves the cache to format 3, which releases before 0.56 refuse.
// The handle's view of that can be stale: another process may have unbound the last second
// binding and compacted to format 2 since. The store decides under its writer lock
// (AliasSliceItem.besideOnlyIfSeveral): such a record is not applied, the format stays 2, and
// flushObjectStamps counts it in keptFormatBindings (neither recorded nor failed).
import { openCacheStore } from '@splitzip/store';
import { expect, it } from 'vitest';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import { holdSecondBinding, SECOND_BINDING_SHARD } from './helpers/hold-second-binding.js';
import { manifestFormat, name, useCleanups, writeRevisions } from './helpers/two-revisions.js';

const cleanups = useCleanups();

it('a handle that saw a second binding, removed and compacted to format 2 by another since: its load binds nothing beside (format 2 kept), B served raw, and says why', async () => {
  const { A, B, cacheDir } = await writeRevisions('splitzip-format-kept-lock-', cleanups);
  await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
  // B's layer 2: its entry held, its slice bound to A's entry only (A's file stamp).
  await buildCache(B, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(2)] });
  await holdSecondBinding(cacheDir);
  expect(await manifestFormat(cacheDir)).toBe(3);
  const raw = await readAllRaw(B);

  const cache = await openShardCache(cacheDir);
  cleanups.push(() => cache.close());
  expect(cache.store.holdsSeveralBindings).toBe(true);
  // Another process removes the last second binding: the cache is compacted to format 2.
  const other = await openCacheStore(cacheDir, { sliceBindingsPerFile: true });
  try {
    expect(await other.unbindSlices([{ shardName: SECOND_BINDING_SHARD, offsetBytes: 0, sizeBytes: 64 * 64 * 2 }])).toBe(2);
    expect(other.holdsSeveralBindings).toBe(false);
  } finally {
    await other.close();
  }
  expect(await manifestFormat(cacheDir)).toBe(2);
  expect(cache.store.holdsSeveralBindings).toBe(true); // this handle's view: not refreshed since

  const t = await loadTensor({ model: B, name: name(2) }, { cache, backend: 'cpu' });
  expect(sameBytes(t.data, raw.get(name(2))!)).toBe(true);
  expect(t).toMatchObject({ source: 'raw', reason: 'stale' });
  const stats = await cache.flushObjectStamps!();
  expect(await manifestFormat(cacheDir)).toBe(2);
  expect(stats).toMatchObject({ recorded: 0, failed: 0, keptFormatBindings: 1 });
  expect(t.report.detail).toMatch(/added beside .* only if the cache still holds a second binding of some slice when it commits/);
  expect(await cache.store.refresh().then(() => cache.store.holdsSeveralBindings)).toBe(false);

  // A new handle sees format 2: stale, naming the build that binds it beside.
  const fresh = await openShardCache(cacheDir);
  try {
    const again = await loadTensor({ model: B, name: name(2) }, { cache: fresh, backend: 'cpu' });
    expect(sameBytes(again.data, raw.get(name(2))!)).toBe(true);
    expect(again).toMatchObject({ source: 'raw', reason: 'stale' });
    expect(again.report.detail).toMatch(/a load adds no binding beside another file's to a cache holding one binding per slice/);
    expect(await fresh.flushObjectStamps!()).toMatchObject({ recorded: 0, failed: 0, keptFormatBindings: 0 });
  } finally {
    await fresh.close();
  }
  expect(await manifestFormat(cacheDir)).toBe(2);
});

it('ShardCache.aliasSlice, an explicit write as a build is, binds beside another file\'s binding in a format-2 cache and moves it to format 3 (the README says so)', async () => {
  const { A, B, cacheDir } = await writeRevisions('splitzip-format-kept-lock-', cleanups);
  await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
  const keysB = await buildCache(B, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(2)] });
  expect(await manifestFormat(cacheDir)).toBe(2);
  const cache = await openShardCache(cacheDir);
  try {
    const slice = B.getTensor(name(2))!.slice;
    expect(await cache.aliasSlice(keysB.get(name(2))!, slice.shardName, slice.offsetBytes, slice.sizeBytes, B.shards[0]!.stamp!)).toBe(true);
    expect(cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(2);
    expect(await manifestFormat(cacheDir)).toBe(3);
  } finally {
    await cache.close();
  }
});
