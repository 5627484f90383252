// A binding beside others (s3://, FILE-BINDINGS.md "Phase 2", Adding beside) never lands just above a
// binding without an object stamp: that one would be shadowed for good (nothing finds it by a stamp),
// and its writer was answered true. Judged on the call's listing, again before each retry, and
// after the write; refused as SLICE_CONFLICT, its own alias deleted.
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { stampObjectName } from '../src/s3-layout.js';
import { catchError, makeTensor, type TestTensor } from './helpers.js';
import { holdAliasPut } from './s3-alias-hooks.js';
import { describeS3 } from './s3-helpers.js';
import { etag, FILE, keysOf, openWithRevisions, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: a beside write never shadows a binding without an object stamp', () => {
  const { bucket, client } = useFileBindingsBucket('beside-shadow');
  let run = 0;
  async function makeCache(): Promise<{ prefix: string; url: string; w: CacheStore; a: TestTensor; b: TestTensor; c: TestTensor }> {
    const prefix = `s${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [a, b, c] = [0, 1, 2].map((i) => makeTensor([40, 6], 600 + i + run * 10)) as [TestTensor, TestTensor, TestTensor];
    const w = await openWithRevisions(url, [a, b, c]);
    expect(await w.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    return { prefix, url, w, a, b, c };
  }

  it('a rebind with a file stamp landing at the beside write\'s epoch: the retry is judged again and refused; the rebind stays the latest', async () => {
    const { url, w, a, b, c } = await makeCache();
    const builder = await openCacheStore(url);
    try {
      let rebound: boolean[] | undefined;
      holdAliasPut(w, {
        before: async () => {
          await builder.refresh();
          rebound = await builder.aliasSlices([{ key: b.key, ...SLICE, stamp: FILE }], { rebind: true });
        },
      });
      const error = await catchError(() => w.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }]));
      expect(error).toMatchObject({ code: 'SLICE_CONFLICT' });
      expect(rebound).toEqual([true]);
      const reader = await openCacheStore(url);
      expect(keysOf(reader)[0]).toBe(b.key);
      expect(keysOf(reader)).not.toContain(c.key);
      expect(reader.lookupSliceBinding(SHARD, 0, 480)?.entry.key).toBe(b.key);
      await builder.refresh();
      expect(builder.lookupSliceBinding(SHARD, 0, 480, FILE)).toMatchObject({ entry: { key: b.key }, stamps: [FILE] });
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))?.entry.key).toBe(a.key);
      await reader.close();
    } finally {
      await builder.close();
      await w.close();
    }
  });

  it('the latest binding loses its only stamp object before the beside alias lands: the write is withdrawn, not left above it', async () => {
    const { prefix, url, w, a, c } = await makeCache();
    try {
      holdAliasPut(w, {
        before: async () => {
          await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName([SHARD, 0, 480], a.key, etag(1), prefix)}` }));
        },
      });
      const error = await catchError(() => w.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }]));
      expect(error).toMatchObject({ code: 'SLICE_CONFLICT' });
      const reader = await openCacheStore(url);
      expect(keysOf(reader)).toEqual([a.key]);
      await reader.close();
    } finally {
      await w.close();
    }
  });
});
