// A format-1 s3:// handle reads cache.json again at a refresh when the SET of stamp objects below
// their slice's top epoch changed since its last look (FILE-BINDINGS.md "Phase 2", Format gate). It
// compared their count: a gc removing a rebound slice's leftover stamp while another handle moved
// the cache to format 2 (adding the old latest's stamp below the top) kept the count, and the
// handle went on reading format 1: the lower binding unseen.
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { stampObjectName } from '../src/s3-layout.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, openWithRevisions, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

const OTHER = { shardName: 'model-00002-of-00002.safetensors', offsetBytes: 0, sizeBytes: 480 } as const;

describeS3('S3 store: a format-1 handle learns the move', () => {
  const { bucket, client } = useFileBindingsBucket('format-look');

  it('a leftover stamp deleted while the move adds one below the top: the handle reads cache.json again and sees both bindings', async () => {
    const prefix = 'm/';
    const url = `s3://${bucket}/${prefix}`;
    const [a, b, c] = [0, 1, 2].map((i) => makeTensor([40, 6], 800 + i)) as [TestTensor, TestTensor, TestTensor];
    const w = await openWithRevisions(url, [a, b, c]);
    const reader = await openCacheStore(url);
    try {
      expect(await w.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
      // Another slice rebound from c (stamped) to a: c's stamp is a leftover below the top.
      expect(await w.aliasSlices([{ key: c.key, ...OTHER, stamp: etag(7) }])).toEqual([true]);
      expect(await w.aliasSlices([{ key: a.key, ...OTHER }], { rebind: true })).toEqual([true]);
      await reader.refresh();
      expect(reader.holdsSeveralBindings).toBe(false);
      // A gc removes the leftover; another handle binds b beside a (the move: a's stamp goes below the top).
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName([OTHER.shardName, 0, 480], c.key, etag(7), prefix)}` }));
      expect(await w.aliasSlices([{ key: b.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
      await reader.refresh();
      expect(reader.lookupSliceBindings(SHARD, 0, 480).map((x) => x.entry.key)).toEqual([b.key, a.key]);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(a.key);
    } finally {
      await reader.close();
      await w.close();
    }
  });
});
