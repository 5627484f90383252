// Other keys' claims of a stamp (s3://, FILE-BINDINGS.md "Phase 2", One stamp, one key) are deleted
// only once the binding that takes the stamp is confirmed, and each is looked at before its DELETE.
// A beside write deleted them before its alias PUT, so a write then withdrawn (SLICE_CONFLICT) had
// removed them already; and they were deleted by name, also one written again since the listing
// (another writer's claim now).
import { HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { stampObjectName } from '../src/s3-layout.js';
import { catchError, makeTensor, type TestTensor } from './helpers.js';
import { holdAliasPut } from './s3-alias-hooks.js';
import { describeS3 } from './s3-helpers.js';
import { etag, FILE, openWithRevisions, S, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: deleting other keys\' claims of a stamp', () => {
  const { bucket, client } = useFileBindingsBucket('claim-deletes');
  let run = 0;
  /** a bound with etag 1; d holds a claim of `claimed` (a stamp object, no alias). */
  async function makeCache(claimed: string): Promise<{ prefix: string; url: string; w: CacheStore; a: TestTensor; b: TestTensor; c: TestTensor; claimKey: string }> {
    const prefix = `c${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [a, b, c, d] = [0, 1, 2, 3].map((i) => makeTensor([40, 6], 700 + i + run * 10)) as [TestTensor, TestTensor, TestTensor, TestTensor];
    const w = await openWithRevisions(url, [a, b, c, d]);
    expect(await w.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    const claimKey = `${prefix}${stampObjectName(S, d.key, claimed, prefix)}`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: claimKey, Body: new Uint8Array(0) }));
    await w.refresh();
    return { prefix, url, w, a, b, c, claimKey };
  }
  const exists = (key: string): Promise<boolean> =>
    client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })).then(
      () => true,
      (error: { name?: string; $metadata?: { httpStatusCode?: number } }) => {
        if (error.$metadata?.httpStatusCode === 404 || error.name === 'NotFound') return false;
        throw error;
      },
    );

  it('a beside write withdrawn (a rebind with a file stamp landed first) leaves the other key\'s claim of its stamp', async () => {
    const { url, w, b, c, claimKey } = await makeCache(etag(3));
    const builder = await openCacheStore(url);
    try {
      holdAliasPut(w, {
        before: async () => {
          await builder.refresh();
          expect(await builder.aliasSlices([{ key: b.key, ...SLICE, stamp: FILE }], { rebind: true })).toEqual([true]);
        },
      });
      expect(await catchError(() => w.aliasSlices([{ key: c.key, ...SLICE, stamp: etag(3) }]))).toMatchObject({ code: 'SLICE_CONFLICT' });
      expect(await exists(claimKey)).toBe(true);
    } finally {
      await builder.close();
      await w.close();
    }
  });

  it('a claim written again after the recording handle listed it stays (another writer\'s now)', async () => {
    const { url, w, a, claimKey } = await makeCache(etag(9));
    const handle = await openCacheStore(url);
    try {
      const transport = (handle as unknown as { transport: { deleteObject: (name: string, before?: () => Promise<boolean>) => Promise<boolean> } }).transport;
      const del = transport.deleteObject.bind(transport);
      let rewritten = false;
      transport.deleteObject = async (name, before) => {
        if (!rewritten && claimKey.endsWith(name)) {
          rewritten = true;
          // Another writer records the claim again, in a later second than the listing's object.
          await new Promise((resolve) => setTimeout(resolve, 1100));
          await client.send(new PutObjectCommand({ Bucket: bucket, Key: claimKey, Body: new Uint8Array(0) }));
        }
        return del(name, before);
      };
      expect(await handle.aliasSlices([{ key: a.key, ...SLICE, stamp: etag(9) }])).toEqual([true]);
      expect(rewritten).toBe(true);
      expect(await exists(claimKey)).toBe(true);
      expect(handle.lookupSliceBinding(SHARD, 0, 480, etag(9))).toMatchObject({ entry: { key: a.key } });
    } finally {
      await handle.close();
      await w.close();
    }
  });
});
