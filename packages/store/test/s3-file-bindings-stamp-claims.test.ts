// A stamp names one object's bytes, so at a slice it belongs to one key (s3://, FILE-BINDINGS.md
// "Phase 2"): recording stamp S with key K deletes other keys' stamp objects of S there, and gc
// removes a lower key's object of a stamp a higher binding holds. Left, the lower key's claim came
// back, trusted (another entry's bytes for S), when K was unbound or the lower key bound again above.
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { stampObjectName } from '../src/s3-layout.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3, gcBelowFloorForTests } from './s3-helpers.js';
import { etag, keysOf, openWithRevisions, S, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: a stamp recorded with one key leaves the others', () => {
  const { bucket, client } = useFileBindingsBucket('stamp-claims');
  let run = 0;
  async function stampNames(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}stamps/` }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }
  async function makeCache(): Promise<{ prefix: string; url: string; store: CacheStore; a: TestTensor; b: TestTensor }> {
    const prefix = `c${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [a, b] = [0, 1].map((i) => makeTensor([40, 6], 900 + i + run * 10)) as [TestTensor, TestTensor];
    const store = await openWithRevisions(url, [a, b]);
    return { prefix, url, store, a, b };
  }

  it('a stamp recorded with the latest binding does not come back to the older one when the latest is unbound', async () => {
    const { prefix, url, store, a, b } = await makeCache();
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }, { key: a.key, ...SLICE, stamp: etag(3) }])).toEqual([true, true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(b.key);
      expect(await stampNames(prefix)).not.toContain(stampObjectName(S, a.key, etag(1), prefix));
      expect(await store.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([a.key]);
      // a is the latest, but not for etag(1): that object's bytes hashed to b (checked, not trusted).
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.stamps).toEqual([etag(3)]);
      await reader.close();
    } finally {
      await store.close();
    }
  });

  it('an older key bound again above, with a new stamp, does not take back a stamp the other binding holds', async () => {
    const { store, a, b } = await makeCache();
    try {
      await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }]);
      await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]);
      await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(1) }]);
      expect(keysOf(store)).toEqual([b.key]);
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(5) }])).toEqual([true]);
      expect(keysOf(store)).toEqual([a.key, b.key]);
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(b.key);
      expect(store.lookupSliceBinding(SHARD, 0, 480, etag(5))?.entry.key).toBe(a.key);
    } finally {
      await store.close();
    }
  });

  it('gc removes a lower key\'s stamp object of a stamp a higher binding holds (written by an older writer)', async () => {
    const { prefix, url, store, a, b } = await makeCache();
    try {
      await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(3) }]);
      await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }]);
      // Both claim etag(1), as a writer before this fix left it: b (higher) holds it, a's object is an orphan.
      for (const key of [a.key, b.key]) await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName(S, key, etag(1), prefix)}`, Body: new Uint8Array(0) }));
      const report = await gcBelowFloorForTests(store);
      expect(report.orphanStamps).toEqual([stampObjectName(S, a.key, etag(1), prefix)]);
      expect(await store.unbindSlices([{ ...SLICE, key: b.key }])).toBe(1);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([a.key]);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.stamps).toEqual([etag(3)]);
      await reader.close();
    } finally {
      await store.close();
    }
  });
});
