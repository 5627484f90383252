// gc and the drop on s3:// judge the format (cache.json) AFTER the listing they judge
// (FILE-BINDINGS.md, "Phase 2: s3://", Format gate): a move to format 2 between an earlier look and
// the listing was judged as format 1, so gc deleted the older binding's stamps and the drop its
// entry; and a cache.json that cannot be read is judged as format 2 (keeps more), not format 1.
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3, dropBelowFloorForTests, gcBelowFloorForTests } from './s3-helpers.js';
import { etag, keysOf, openWithRevisions, SHARD, SLICE, transportOf, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

/** Runs `first` once, just before the handle's first listing of the whole prefix. */
function beforeWholeListing(store: CacheStore, first: () => Promise<unknown>): void {
  const transport = transportOf(store);
  const list = transport.list.bind(transport);
  let done = false;
  transport.list = async (prefix: string) => {
    if (prefix === '' && !done) {
      done = true;
      await first();
    }
    return list(prefix);
  };
}

/** Every later read of cache.json answers as a 404 would. */
function hideHeader(store: CacheStore): void {
  const transport = transportOf(store);
  const get = transport.getSmallObject.bind(transport);
  transport.getSmallObject = (name, max) => (name === 'cache.json' ? Promise.resolve(undefined) : get(name, max));
}

describeS3('S3 store: gc and the drop read the format after their listing', () => {
  const { bucket } = useFileBindingsBucket('format-race');
  let run = 0;
  async function makeCache(): Promise<{ url: string; store: CacheStore; a: TestTensor; b: TestTensor }> {
    const url = `s3://${bucket}/q${run++}/`;
    const [a, b] = [0, 1].map((i) => makeTensor([40, 6], 500 + i + run * 20)) as [TestTensor, TestTensor];
    const store = await openWithRevisions(url, [a, b]);
    expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    return { url, store, a, b };
  }

  it('gc: a move to format 2 just before its listing keeps the older binding (its stamp)', async () => {
    const { url, store, a, b } = await makeCache();
    const gcHandle = await openCacheStore(url);
    try {
      beforeWholeListing(gcHandle, () => store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]));
      await gcBelowFloorForTests(gcHandle);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([b.key, a.key]);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key }, stamps: [etag(1)] });
      await reader.close();
    } finally {
      await gcHandle.close();
      await store.close();
    }
  });

  it('the drop: a move to format 2 just before its listing keeps the older binding\'s entry', async () => {
    const { url, store, a, b } = await makeCache();
    const dropHandle = await openCacheStore(url);
    try {
      beforeWholeListing(dropHandle, () => store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]));
      await dropBelowFloorForTests(dropHandle);
      const reader = await openCacheStore(url);
      expect(reader.getEntry(a.key)).toBeDefined();
      expect(keysOf(reader)).toEqual([b.key, a.key]);
      await reader.close();
    } finally {
      await dropHandle.close();
      await store.close();
    }
  });

  it('cache.json unreadable to a format-1 handle (a 404 after the move): gc and the drop judge as format 2', async () => {
    const { url, store, a, b } = await makeCache();
    const old = await openCacheStore(url);
    try {
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      hideHeader(old);
      await gcBelowFloorForTests(old);
      await dropBelowFloorForTests(old);
      const reader = await openCacheStore(url);
      expect(reader.getEntry(a.key)).toBeDefined();
      expect(keysOf(reader)).toEqual([b.key, a.key]);
      await reader.close();
    } finally {
      await old.close();
      await store.close();
    }
  });
});
