// Recording with a lower binding of a format-2 slice that has no usable latest binding (its top
// key's entry unreadable, or a conflict at the top: s3://, FILE-BINDINGS.md "Phase 2", Adding
// beside): the lower key stays bound and only its stamp is recorded, as for any file binding below
// the top. The call wrote an alias at the top epoch, met the top's, withdrew it and threw
// SLICE_CONFLICT, also for a stamp the lower key held: the runtime counted a failed record and
// hashed again at every load; addEntries re-adding the lower key deleted its alias (binding lost).
// Another key is refused before anything is written, the top named.
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, FILE, openWithRevisions, S, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: recording with a lower binding where the slice has no usable latest', () => {
  const { bucket, client } = useFileBindingsBucket('headless-record');
  let run = 0;
  /** Bindings [b, a] (a with etag 1, b with etag 2), then b's entry object garbled, or a third key c at b's epoch. */
  async function makeHeadless(how: 'unreadable' | 'conflict'): Promise<{ prefix: string; url: string; store: CacheStore; a: TestTensor; b: TestTensor; c: TestTensor }> {
    const prefix = `r${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [a, b, c] = [0, 1, 2].map((i) => makeTensor([40, 6], 600 + i + run * 10)) as [TestTensor, TestTensor, TestTensor];
    const store = await openWithRevisions(url, [a, b, c]);
    expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
    if (how === 'unreadable') {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/${b.key}` }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: listed.Contents![0]!.Key!, Body: 'garbage' }));
    } else {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName(S, c.key, etag(3), prefix)}`, Body: new Uint8Array(0) }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName(S, 1, c.key)}`, Body: new Uint8Array(0) }));
    }
    return { prefix, url, store, a, b, c };
  }
  const aliasNames = async (prefix: string): Promise<string[]> =>
    ((await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}slices/` }))).Contents ?? []).map((o) => o.Key!).sort();

  for (const how of ['unreadable', 'conflict'] as const) {
    for (const [label, perFile, stamp] of [
      ['a new object stamp, a plain handle', false, etag(7)],
      ['a new object stamp, sliceBindingsPerFile', true, etag(7)],
      ['a file stamp, a plain handle', false, FILE],
      ['the stamp it holds', false, etag(1)],
    ] as const) {
      it(`top ${how}: the lower key with ${label}: true, no alias written, found by that stamp`, async () => {
        const { prefix, url, store, a } = await makeHeadless(how);
        const handle = await openCacheStore(url, perFile ? { sliceBindingsPerFile: true } : {});
        try {
          const before = await aliasNames(prefix);
          expect(await handle.aliasSlices([{ key: a.key, ...SLICE, stamp }])).toEqual([true]);
          expect(await aliasNames(prefix)).toEqual(before);
          // A file stamp stays on this host (host stamps): this handle finds it; object stamps every reader.
          const reader = stamp === FILE ? handle : await openCacheStore(url);
          expect(reader.lookupSliceBinding(SHARD, 0, 480, stamp)).toMatchObject({ entry: { key: a.key } });
          expect(reader.lookupSliceBinding(SHARD, 0, 480, stamp)?.stamps).toContain(stamp);
          expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key } });
          expect(reader.lookupSliceBinding(SHARD, 0, 480)).toBeUndefined(); // still no latest
          if (reader !== handle) await reader.close();
        } finally {
          await handle.close();
          await store.close();
        }
      });
    }
  }

  it('top unreadable: addEntries re-adding the lower key keeps its binding and records its stamp', async () => {
    const { prefix, url, store, a } = await makeHeadless('unreadable');
    const handle = await openCacheStore(url);
    try {
      const before = await aliasNames(prefix);
      // An alias at epoch 0 (its own lower alias's name) lost to the top and was deleted: binding lost.
      expect(await handle.addEntries([toInput(a, 'rev0.weight', [[SHARD, 0, 480, [etag(7)]]])])).toEqual([{ key: a.key, added: false, slicesBound: 0 }]);
      expect(await aliasNames(prefix)).toEqual(before);
      const reader = await openCacheStore(url);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key } });
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(7))).toMatchObject({ entry: { key: a.key } });
      await reader.close();
    } finally {
      await handle.close();
      await store.close();
    }
  });

  it('top unreadable: addEntries of a new key bound there is SLICE_CONFLICT before any write; leaveTakenSlices leaves the slice out', async () => {
    const { prefix, url, store, b } = await makeHeadless('unreadable');
    const handle = await openCacheStore(url);
    try {
      const before = await aliasNames(prefix);
      const [d, e] = [0, 1].map((i) => makeTensor([40, 6], 990 + i + run * 10)) as [TestTensor, TestTensor];
      const refused = handle.addEntries([toInput(d, 'rev3.weight', [[SHARD, 0, 480, [etag(8)]]])]);
      await expect(refused).rejects.toMatchObject({ code: 'SLICE_CONFLICT', details: { topKey: b.key, topEntry: 'unreadable', requestedKey: d.key } });
      expect(handle.getEntry(d.key)).toBeUndefined();
      const left = await handle.addEntries([{ ...toInput(e, 'rev4.weight', [[SHARD, 0, 480, [etag(9)]]]), leaveTakenSlices: true }]);
      expect(left).toEqual([{ key: e.key, added: true, slicesBound: 0 }]);
      expect(await aliasNames(prefix)).toEqual(before);
    } finally {
      await handle.close();
      await store.close();
    }
  });

  it('top unreadable: another key is SLICE_CONFLICT naming the top and its entry, nothing written', async () => {
    const { prefix, url, store, b, c } = await makeHeadless('unreadable');
    const handle = await openCacheStore(url);
    try {
      const before = await aliasNames(prefix);
      const refused = handle.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(5) }]);
      await expect(refused).rejects.toMatchObject({ code: 'SLICE_CONFLICT', details: { topKey: b.key, topEntry: 'unreadable', requestedKey: c.key } });
      await expect(refused).rejects.toThrow(/no usable latest binding.*is unreadable.*rebind/);
      expect(await aliasNames(prefix)).toEqual(before);
      // rebind still binds it above.
      expect(await handle.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(5) }], { rebind: true })).toEqual([true]);
      expect(handle.lookupSliceBinding(SHARD, 0, 480)).toMatchObject({ entry: { key: c.key } });
    } finally {
      await handle.close();
      await store.close();
    }
  });
});
