// Host file stamps of an S3 cache against the gateway: a file stamp given to aliasSlices or
// addEntries is shown by this instance, by others with the same readThroughDir (after a refresh for
// one open already), never by one without it or with another; never on another key's binding;
// capped; damaged files and failing writes never fail a lookup or a write; nothing in the bucket.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, expect, it } from 'vitest';
import { MAX_SLICE_STAMPS, openCacheStore, type CacheStore } from '../src/index.js';
import { hostStampFileName } from '../src/host-file-stamps.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const etag = (n: number): string => `etag:"${n.toString(16).padStart(32, '0')}"`;
const fileStamp = (n: number): string => `80:${1733400000000000000n + BigInt(n)}`;
const SHARD = 'model-00001-of-00001.safetensors';

afterAll(removeTempDirs);

describeS3('S3 host file stamps against the gateway', () => {
  const bucket = uniqueBucket('hoststamps');
  const client = rawClient();
  let run = 0;
  const url = (prefix: string) => `s3://${bucket}/${prefix}`;
  const nextPrefix = () => `t${run++}/`;

  useTestBucket(client, bucket);

  async function listNames(prefix: string, below: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${below}` }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }
  const stampsOf = (store: CacheStore, offset = 0, size = 80) => store.lookupSliceBinding(SHARD, offset, size)?.stamps;
  const open = (prefix: string, readThroughDir?: string) => openCacheStore(url(prefix), readThroughDir === undefined ? {} : { s3: { readThroughDir } });

  it('aliasSlices with a file stamp: shown by this instance and by others of the same readThroughDir, not without it or with another', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const a = makeTensor([40], 1);
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(a, 'a'));
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: etag(1) }])).toEqual([true]);
    const opened = await open(prefix, dir); // open before the file stamp: sees it after a refresh
    expect(stampsOf(opened)).toEqual([etag(1)]);
    // Bound already: the file stamp is added, after the bucket's stamps; a new binding with one too.
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: fileStamp(1) }])).toEqual([true]);
    expect(await store.aliasSlice(a.key, SHARD, 160, 80, fileStamp(2))).toBe(true);
    expect(stampsOf(store)).toEqual([etag(1), fileStamp(1)]);
    expect(stampsOf(store, 160)).toEqual([fileStamp(2)]);
    expect(store.lookupBySlice(SHARD, 160, 80)?.key).toBe(a.key);
    // Never in the bucket: only the object stamp's object is there.
    expect(await listNames(prefix, 'stamps/')).toHaveLength(1);
    expect((await readdir(dir)).filter((name) => name.startsWith('stamps.'))).toEqual([hostStampFileName(SHARD)]);
    // Same directory: a new instance reads the file; one opened before reads it again after a refresh.
    const same = await open(prefix, dir);
    expect(stampsOf(same)).toEqual([etag(1), fileStamp(1)]);
    expect(stampsOf(same, 160)).toEqual([fileStamp(2)]);
    await opened.refresh();
    expect(stampsOf(opened)).toEqual([etag(1), fileStamp(1)]);
    // No directory, or another: the bucket's stamps only.
    const without = await open(prefix);
    const elsewhere = await open(prefix, await makeTempDir());
    for (const other of [without, elsewhere]) {
      expect(stampsOf(other)).toEqual([etag(1)]);
      expect(stampsOf(other, 160)).toEqual([]);
    }
    // Recording one the binding shows already changes nothing.
    expect(await same.aliasSlice(a.key, SHARD, 0, 80, fileStamp(1))).toBe(true);
    expect(stampsOf(same)).toEqual([etag(1), fileStamp(1)]);
    await Promise.all([store, opened, same, without, elsewhere].map((s) => s.close()));
  });

  it('without a readThroughDir a file stamp lives in the instance\'s memory only', async () => {
    const prefix = nextPrefix();
    const a = makeTensor([40], 2);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntry(toInput(a, 'a'));
    expect(await store.aliasSlice(a.key, SHARD, 0, 80, fileStamp(1))).toBe(true);
    expect(stampsOf(store)).toEqual([fileStamp(1)]);
    await store.refresh();
    expect(stampsOf(store)).toEqual([fileStamp(1)]);
    const other = await open(prefix);
    expect(stampsOf(other)).toEqual([]);
    await Promise.all([store.close(), other.close()]);
  });

  it('addEntries records its slice keys\' file stamps as host stamps (new entry, re-add of a bound slice and a new one)', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const [a, b] = [makeTensor([40], 3), makeTensor([40], 4)];
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    const [added] = await store.addEntries([toInput(a, 'a', [[SHARD, 0, 80, [fileStamp(1), etag(1)]]])]);
    expect(added).toEqual({ key: a.key, added: true, slicesBound: 1 });
    expect(stampsOf(store)).toEqual([etag(1), fileStamp(1)]);
    const [again] = await store.addEntries([toInput(a, 'a', [[SHARD, 0, 80, [fileStamp(2)]], [SHARD, 800, 80, [fileStamp(3)]]])]);
    expect(again).toEqual({ key: a.key, added: false, slicesBound: 1 });
    // leaveTakenSlices: a slice bound to another key is left out, and so is its file stamp.
    const [left] = await store.addEntries([{ ...toInput(b, 'b', [[SHARD, 0, 80, [fileStamp(9)]]]), leaveTakenSlices: true }]);
    expect(left).toEqual({ key: b.key, added: true, slicesBound: 0 });
    const other = await open(prefix, dir);
    expect(stampsOf(other)).toEqual([etag(1), fileStamp(1), fileStamp(2)]);
    expect(stampsOf(other, 800)).toEqual([fileStamp(3)]);
    expect(store.getEntry(a.key)?.sliceKeys).toEqual([[SHARD, 0, 80, [etag(1)]], [SHARD, 800, 80]]); // entries carry the bucket's stamps only
    await Promise.all([store.close(), other.close()]);
  });

  it('host stamps of key K are not shown once the slice is rebound to K2 (this instance, and another of the same directory)', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const [a, b] = [makeTensor([40], 5), makeTensor([40], 6)];
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
    expect(await store.aliasSlice(a.key, SHARD, 0, 80, fileStamp(1))).toBe(true);
    expect(stampsOf(store)).toEqual([fileStamp(1)]);
    expect(await store.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80 }], { rebind: true })).toEqual([true]);
    expect(store.lookupBySlice(SHARD, 0, 80)?.key).toBe(b.key);
    expect(stampsOf(store)).toEqual([]);
    expect(stampsOf(await open(prefix, dir))).toEqual([]);
    // Rebound with a file stamp: the new key's only.
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: fileStamp(2) }], { rebind: true })).toEqual([true]);
    expect(stampsOf(store)).toEqual([fileStamp(1), fileStamp(2)]); // a's records: both say what the file held for a
    expect(await store.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: fileStamp(3) }], { rebind: true })).toEqual([true]);
    expect(stampsOf(store)).toEqual([fileStamp(3)]);
    const other = await open(prefix, dir);
    expect(stampsOf(other)).toEqual([fileStamp(3)]);
    await Promise.all([store.close(), other.close()]);
  });

  it('keeps the newest MAX_SLICE_STAMPS file stamps of a binding', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const a = makeTensor([40], 7);
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(a, 'a'));
    const count = MAX_SLICE_STAMPS + 4;
    for (let n = 0; n < count; n++) expect(await store.aliasSlice(a.key, SHARD, 0, 80, fileStamp(n))).toBe(true);
    const newest = Array.from({ length: MAX_SLICE_STAMPS }, (_, i) => fileStamp(count - MAX_SLICE_STAMPS + i));
    expect(stampsOf(store)).toEqual(newest);
    const other = await open(prefix, dir);
    expect(stampsOf(other)).toEqual(newest);
    await Promise.all([store.close(), other.close()]);
  });

  it('a damaged host-stamp file shows no host stamps and never throws; the next record rewrites it', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const a = makeTensor([40], 8);
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(a, 'a'));
    expect(await store.aliasSlice(a.key, SHARD, 0, 80, fileStamp(1))).toBe(true);
    const path = join(dir, hostStampFileName(SHARD));
    for (const damage of ['truncated', 'directory'] as const) {
      if (damage === 'truncated') await writeFile(path, 'SZHSTMP1');
      else {
        await rm(path, { force: true });
        await mkdir(path);
      }
      const other = await open(prefix, dir);
      expect(stampsOf(other)).toEqual([]);
      expect(other.lookupBySlice(SHARD, 0, 80)?.key).toBe(a.key);
      expect(await other.aliasSlice(a.key, SHARD, 0, 80, fileStamp(2))).toBe(true);
      expect(stampsOf(other)).toEqual([fileStamp(2)]);
      const after = await open(prefix, dir);
      expect(stampsOf(after)).toEqual([fileStamp(2)]);
      await Promise.all([other.close(), after.close()]);
      await rm(path, { recursive: true, force: true });
    }
    await store.close();
  });

  it('a host-stamp write that fails (a file where the directory should be) still records in memory, and aliasSlices resolves', async () => {
    const prefix = nextPrefix();
    const parent = await makeTempDir();
    const dir = join(parent, 'rt');
    const a = makeTensor([40], 9);
    await openCacheStore(url(prefix), { create: true }).then(async (s) => {
      await s.addEntry(toInput(a, 'a'));
      await s.close();
    });
    await writeFile(dir, 'not a directory');
    const store = await open(prefix, dir);
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: fileStamp(1) }])).toEqual([true]);
    expect(stampsOf(store)).toEqual([fileStamp(1)]);
    await store.refresh();
    expect(stampsOf(store)).toEqual([fileStamp(1)]);
    await store.close();
  });
});
