// A format-2 slice whose top epoch gives no usable latest binding (its key's entry unreadable, or
// two keys there: a conflict) has no latest binding (s3://, FILE-BINDINGS.md "Phase 2", Reading):
// a lookup without a stamp misses, as format 1 does; one with a stamp a lower binding holds still
// finds that binding. The view gave the first lower binding as the latest, which a reader without
// a stamp trusts: another revision's bytes.
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, openWithRevisions, S, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: no usable latest binding', () => {
  const { bucket, client } = useFileBindingsBucket('headless');
  let run = 0;
  async function makeCache(): Promise<{ prefix: string; url: string; store: CacheStore; revs: TestTensor[] }> {
    const prefix = `h${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const revs = [0, 1, 2].map((i) => makeTensor([40, 6], 400 + i + run * 10));
    const store = await openWithRevisions(url, revs);
    expect(await store.aliasSlices([{ key: revs[0]!.key, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    expect(await store.aliasSlices([{ key: revs[1]!.key, ...SLICE, stamp: etag(2) }])).toEqual([true]);
    return { prefix, url, store, revs };
  }
  function expectHeadless(reader: CacheStore, a: TestTensor): void {
    expect(reader.lookupSliceBinding(SHARD, 0, 480)).toBeUndefined();
    expect(reader.lookupBySlice(SHARD, 0, 480)).toBeUndefined();
    expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(9))).toBeUndefined();
    expect(reader.lookupSliceBindings(SHARD, 0, 480)).toEqual([]);
    expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(1))).toMatchObject({ entry: { key: a.key }, stamps: [etag(1)] });
  }

  it('the latest binding\'s entry object unreadable: a stampless lookup misses, the older binding is found by its stamp', async () => {
    const { prefix, url, store, revs } = await makeCache();
    try {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/${revs[1]!.key}` }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: listed.Contents![0]!.Key!, Body: 'garbage' }));
      const reader = await openCacheStore(url);
      expectHeadless(reader, revs[0]!);
      await reader.close();
    } finally {
      await store.close();
    }
  });

  it('a conflict at the top epoch: a stampless lookup misses, the older binding is found by its stamp', async () => {
    const { prefix, url, store, revs } = await makeCache();
    try {
      // A third key beside the latest at its epoch (two writers at once, one killed before it settled).
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stampObjectName(S, revs[2]!.key, etag(3), prefix)}`, Body: new Uint8Array(0) }));
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName(S, 1, revs[2]!.key)}`, Body: new Uint8Array(0) }));
      const reader = await openCacheStore(url);
      expectHeadless(reader, revs[0]!);
      await reader.close();
    } finally {
      await store.close();
    }
  });
});
