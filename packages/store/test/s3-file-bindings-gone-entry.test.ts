// A beside write (s3://, FILE-BINDINGS.md "Phase 2") whose own entry object a drop removed before
// its alias landed answers false, its alias deleted, as a plain write does: in format 2 the slice's
// lower binding reads as its owner then, which the write took for a lost race (six writes, then
// SLICE_CONFLICT).
import { DeleteObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { holdAliasPut } from './s3-alias-hooks.js';
import { describeS3 } from './s3-helpers.js';
import { etag, openWithRevisions, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: a beside write whose entry is dropped meanwhile', () => {
  const { bucket, client } = useFileBindingsBucket('gone-entry');

  it('answers false, its alias gone; the other binding stays the latest', async () => {
    const url = `s3://${bucket}/g/`;
    const [a, b] = [0, 1].map((i) => makeTensor([40, 6], 700 + i)) as [TestTensor, TestTensor];
    const w = await openWithRevisions(url, [a, b]);
    try {
      expect(await w.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      holdAliasPut(w, {
        before: async () => {
          const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `g/entries/${b.key}` }));
          for (const o of out.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
        },
      });
      expect(await w.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([false]);
      const aliases = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'g/slices/' }));
      expect((aliases.Contents ?? []).map((o) => o.Key!).filter((k) => k.endsWith(b.key))).toEqual([]);
      const reader = await openCacheStore(url);
      expect(reader.lookupSliceBindings(SHARD, 0, 480).map((x) => x.entry.key)).toEqual([a.key]);
      await reader.close();
    } finally {
      await w.close();
    }
  });

  it('answers false also where another writer\'s alias met it at its epoch (a conflict, not a lost race to retry)', async () => {
    const url = `s3://${bucket}/h/`;
    const [a, b, c] = [0, 1, 2].map((i) => makeTensor([40, 6], 710 + i)) as [TestTensor, TestTensor, TestTensor];
    const w = await openWithRevisions(url, [a, b, c]);
    const other = await openCacheStore(url);
    try {
      expect(await w.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      holdAliasPut(w, {
        before: async () => {
          const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `h/entries/${b.key}` }));
          for (const o of out.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
          await other.refresh();
          expect(await other.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }], { rebind: true })).toEqual([true]);
        },
      });
      expect(await w.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([false]);
      const reader = await openCacheStore(url);
      expect(reader.lookupSliceBinding(SHARD, 0, 480)?.entry.key).toBe(c.key);
      await reader.close();
    } finally {
      await other.close();
      await w.close();
    }
  });
});
