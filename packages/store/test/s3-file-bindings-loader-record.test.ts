// A loader's record on s3:// (FILE-BINDINGS.md, phase 2): an aliasSlices item whose `moveFrom` names
// its own key (the runtime's record of a checked stamp, or of a binding found by content key) with
// besideOnlyIfSeveral. Judged as a plain alias for lower and beside bindings, as a local handle
// judges it: a lower binding's stamp is recorded in place (not written above the latest), a binding
// beside other objects' is added only where cache.json is format 2 already; in a format-1 cache it is
// refused (false, onBesideRefused) and cache.json stays format 1. A slice bound to another key
// with no latest (headless) leaves the conditional item false, nothing thrown.
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore, type SliceKeyTuple } from '../src/index.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, keysOf, openWithRevisions, S, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: a loader record (moveFrom its own key) with one binding per file', () => {
  const { bucket, client } = useFileBindingsBucket('loader-record');
  let run = 0;

  async function layoutFormat(prefix: string): Promise<unknown> {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json` }));
    return (JSON.parse(await out.Body!.transformToString()) as { format: unknown }).format;
  }

  async function makeCache(count: number): Promise<{ prefix: string; url: string; store: CacheStore; revs: TestTensor[] }> {
    const prefix = `r${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const revs = Array.from({ length: count }, (_, i) => makeTensor([40, 6], 900 + i));
    return { prefix, url, store: await openWithRevisions(url, revs), revs };
  }

  /** A loader's record: moveFrom its own key, besideOnlyIfSeveral (apps/runtime enqueueRecord). */
  const record = (key: string, stamp: string) => ({ key, ...SLICE, stamp, moveFrom: key, besideOnlyIfSeveral: true });

  it('format 2: the stamp of a lower binding is recorded with it, the latest stays; a new key is bound beside', async () => {
    const { url, store, revs } = await makeCache(3);
    const [a, b, c] = revs as [TestTensor, TestTensor, TestTensor];
    const loader = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      await loader.refresh();
      expect(keysOf(loader)).toEqual([b.key, a.key]);
      // Another object holding a's bytes (etag 4): its stamp goes with a's binding, below b's.
      expect(await loader.aliasSlices([record(a.key, etag(4))])).toEqual([true]);
      // A third revision's object (etag 3), found by content key to hold c's bytes: beside.
      const refused: string[] = [];
      expect(await loader.aliasSlices([record(c.key, etag(3))], { onBesideRefused: (_slice, key) => void refused.push(key) })).toEqual([true]);
      expect(refused).toEqual([]);
      const reader = await openCacheStore(url);
      try {
        expect(keysOf(reader)).toEqual([c.key, b.key, a.key]);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(4))?.entry.key).toBe(a.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(a.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(2))?.entry.key).toBe(b.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(3))?.entry.key).toBe(c.key);
      } finally {
        await reader.close();
      }
    } finally {
      await loader.close();
      await store.close();
    }
  });

  it('format 1: a record beside another object\'s binding is refused (false, onBesideRefused), cache.json stays format 1; its own binding\'s stamp is recorded', async () => {
    const { prefix, url, store, revs } = await makeCache(2);
    const [a, b] = revs as [TestTensor, TestTensor];
    const loader = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      await loader.refresh();
      const refused: [SliceKeyTuple, string][] = [];
      expect(await loader.aliasSlices([record(b.key, etag(2))], { onBesideRefused: (slice, key) => void refused.push([slice, key]) })).toEqual([false]);
      expect(refused).toEqual([[S, b.key]]);
      expect(await layoutFormat(prefix)).toBe(1);
      expect(await loader.aliasSlices([record(a.key, etag(5))])).toEqual([true]);
      expect(await layoutFormat(prefix)).toBe(1);
      const reader = await openCacheStore(url);
      try {
        expect(keysOf(reader)).toEqual([a.key]);
        expect(reader.lookupSliceBinding(SHARD, 0, 480)?.stamps).toEqual(expect.arrayContaining([etag(1), etag(5)]));
      } finally {
        await reader.close();
      }
    } finally {
      await loader.close();
      await store.close();
    }
  });

  it('no usable latest (the top key\'s entry object unreadable): the lower key\'s record is its stamp only (true); another key\'s is false, nothing written or thrown', async () => {
    const { prefix, url, store, revs } = await makeCache(3);
    const [a, b, c] = revs as [TestTensor, TestTensor, TestTensor];
    let loader: CacheStore | undefined;
    const aliasNames = async (): Promise<string[]> =>
      ((await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}slices/` }))).Contents ?? []).map((o) => o.Key!).sort();
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/${b.key}` }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: listed.Contents![0]!.Key!, Body: 'garbage' }));
      loader = await openCacheStore(url, { sliceBindingsPerFile: true });
      expect(loader.lookupSliceBinding(SHARD, 0, 480)).toBeUndefined(); // no latest
      const before = await aliasNames();
      expect(await loader.aliasSlices([record(a.key, etag(6))])).toEqual([true]);
      expect(await loader.aliasSlices([record(c.key, etag(3))])).toEqual([false]);
      expect(await aliasNames()).toEqual(before);
      const reader = await openCacheStore(url);
      try {
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(6))?.entry.key).toBe(a.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(3))).toBeUndefined();
        expect(reader.lookupSliceBinding(SHARD, 0, 480)).toBeUndefined(); // still no latest
      } finally {
        await reader.close();
      }
    } finally {
      await loader?.close();
      await store.close();
    }
  });

  it("format 1: a loader's record (moveFrom its own key) without besideOnlyIfSeveral, as a caller's store wrapped by the runtime gets it, is refused beside another object's binding (false, onBesideRefused); cache.json stays format 1", async () => {
    const { prefix, url, store, revs } = await makeCache(2);
    const [a, b] = revs as [TestTensor, TestTensor];
    const loader = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      await loader.refresh();
      const refused: string[] = [];
      expect(await loader.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2), moveFrom: b.key }], { onBesideRefused: (_slice, key) => void refused.push(key) })).toEqual([false]);
      expect(refused).toEqual([b.key]);
      expect(await layoutFormat(prefix)).toBe(1);
      expect((loader as { layoutFormat?: number }).layoutFormat).toBe(1);
      const reader = await openCacheStore(url);
      try {
        expect(keysOf(reader)).toEqual([a.key]);
      } finally {
        await reader.close();
      }
    } finally {
      await loader.close();
      await store.close();
    }
  });

  it("format 2: a loader's record beside, raced at its epoch by a rebind without an object stamp (nothing left to bind beside), answers false (as a lost move), nothing thrown; the rebind's binding stays the latest", async () => {
    const { url, store, revs } = await makeCache(4);
    const [a, b, c, d] = revs as [TestTensor, TestTensor, TestTensor, TestTensor];
    const loader = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      await loader.refresh();
      expect(keysOf(loader)).toEqual([b.key, a.key]);
      // Another writer (a local model's build with --rebind: no object stamp) rebinds the slice to d
      // just before the loader's alias object goes up, at the same epoch: judged again, the loader's
      // write would shadow d's binding.
      const transport = (loader as unknown as { transport: { putObject: (name: string, body: Uint8Array, type?: string) => Promise<unknown> } }).transport;
      const put = transport.putObject.bind(transport);
      let raced = false;
      transport.putObject = async (name, body, type) => {
        if (!raced && name.includes('slices/')) {
          raced = true;
          const other = await openCacheStore(url);
          try {
            await other.aliasSlices([{ key: d.key, ...SLICE }], { rebind: true });
          } finally {
            await other.close();
          }
        }
        return put(name, body, type);
      };
      let outcome: unknown;
      try {
        outcome = await loader.aliasSlices([record(c.key, etag(3))]);
      } catch (error) {
        outcome = error;
      }
      expect(raced).toBe(true);
      expect(outcome).toEqual([false]);
      const reader = await openCacheStore(url);
      try {
        expect(reader.lookupSliceBinding(SHARD, 0, 480)?.entry.key).toBe(d.key);
        expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(3))?.entry.key).not.toBe(c.key);
      } finally {
        await reader.close();
      }
    } finally {
      await loader.close();
      await store.close();
    }
  });
});
