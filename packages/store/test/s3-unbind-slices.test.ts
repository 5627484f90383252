// unbindSlices on an s3:// cache: a slice's alias objects (every epoch, the lower ones first) and
// the stamp objects of the keys they bound go; entries, blobs and other slices stay; an alias
// object written again since the listing is left, and with it the binding.
import { setTimeout as sleep } from 'node:timers/promises';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { parseSliceObjectName, sliceObjectName } from '../src/s3-layout.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const ETAG = 'etag:"0123456789abcdef0123456789abcdef"';

type Transport = {
  list(dir: string): Promise<{ name: string }[]>;
  deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean>;
};
const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;

describeS3('S3 store: unbindSlices', () => {
  const bucket = uniqueBucket('unbind');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);

  async function listNames(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }

  /** `a` bound at 0 (with an object stamp) and at 80; the slice at 160 bound to `a` at epoch 0, rebound to `b` at epoch 1. */
  async function makeCache() {
    const prefix = `u${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const a = makeTensor([40, 1], 501);
    const b = makeTensor([40, 1], 502);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(a, 'a.weight', [[SHARD, 0, 80], [SHARD, 80, 80], [SHARD, 160, 80]]), toInput(b, 'b.weight')]);
    expect(await store.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: ETAG }])).toEqual([true]);
    expect(await store.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 160, sizeBytes: 80 }], { rebind: true })).toEqual([true]);
    return { prefix, url, a, b, store };
  }

  it('removes the named bindings (every epoch, lower first) and their stamp objects; entries, blobs and other slices stay, for every reader', async () => {
    const { prefix, url, a, b, store } = await makeCache();
    const reader = await openCacheStore(url);
    const deleted: string[] = [];
    const transport = transportOf(store);
    const deleteObject = transport.deleteObject.bind(transport);
    transport.deleteObject = async (name, beforeAttempt) => {
      deleted.push(`start ${name}`);
      const done = await deleteObject(name, beforeAttempt);
      deleted.push(`end ${name}`);
      return done;
    };
    const blobsBefore = await listNames(`${prefix}blobs/`);
    const entriesBefore = await listNames(`${prefix}entries/`);
    const removed = await store.unbindSlices([
      { shardName: SHARD, offsetBytes: 0, sizeBytes: 80 },
      { shardName: SHARD, offsetBytes: 160, sizeBytes: 80, key: b.key },
      { shardName: SHARD, offsetBytes: 80, sizeBytes: 80, key: b.key }, // bound to `a`: left
      { shardName: SHARD, offsetBytes: 999, sizeBytes: 80 }, // bound to nothing
    ]);
    expect(removed).toBe(2);
    expect(store.lookupBySlice(SHARD, 0, 80)).toBeUndefined();
    expect(store.lookupBySlice(SHARD, 160, 80)).toBeUndefined();
    expect(store.lookupBySlice(SHARD, 80, 80)?.key).toBe(a.key);
    // The rebound slice's epoch-0 object was gone before its epoch-1 object's DELETE began (an older binding never shows through).
    const at160 = deleted.filter((event) => event.includes('slices/') && event.includes('/160-80/')).map((event) => `${event.split(' ')[0]} ${parseSliceObjectName(event.split(' ')[1]!)?.epoch}`);
    expect(at160).toEqual(['start 0', 'end 0', 'start 1', 'end 1']);
    // In the bucket: one alias object left (the slice at 80), no stamp object, every entry and blob.
    expect((await listNames(`${prefix}slices/`)).map((name) => parseSliceObjectName(`slices/${name}`)?.slice[1])).toEqual([80]);
    expect(await listNames(`${prefix}stamps/`)).toEqual([]);
    expect(await listNames(`${prefix}blobs/`)).toEqual(blobsBefore);
    expect(await listNames(`${prefix}entries/`)).toEqual(entriesBefore);
    // Another instance, after its refresh; entries are found by content key.
    await reader.refresh();
    expect(reader.lookupBySlice(SHARD, 0, 80)).toBeUndefined();
    expect(reader.lookupBySlice(SHARD, 160, 80)).toBeUndefined();
    for (const t of [a, b]) expect(reader.lookup(t.bytes, t.shape, 'BF16')?.key).toBe(t.key);
    expect((await reader.verify({ decode: true })).ok).toBe(true);
    const gc = await gcBelowFloorForTests(reader, { dryRun: true });
    expect(gc.orphanBlobs).toEqual([]);
    expect(gc.orphanStamps).toEqual([]);
    // The slice can be bound again (epoch 0: its objects are gone).
    expect(await store.aliasSlice(a.key, SHARD, 0, 80)).toBe(true);
    expect(store.lookupSliceBinding(SHARD, 0, 80)?.stamps).toEqual([]);
    await Promise.all([store.close(), reader.close()]);
  });

  it('leaves a slice whose alias object was written again after its listing (another writer bound it since): 0 removed, still bound', async () => {
    const { prefix, a, store } = await makeCache();
    const transport = transportOf(store);
    const list = transport.list.bind(transport);
    transport.list = async (dir) => {
      const listed = await list(dir);
      if (dir.includes('/80-80/') && dir.startsWith('slices/')) {
        // Another writer's PUT of the same alias, a second later (S3 times have a second's resolution).
        await sleep(1100);
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName([SHARD, 80, 80], 0, a.key)}`, Body: new Uint8Array(0) }));
      }
      return listed;
    };
    expect(await store.unbindSlices([{ shardName: SHARD, offsetBytes: 80, sizeBytes: 80 }])).toBe(0);
    expect(store.lookupBySlice(SHARD, 80, 80)?.key).toBe(a.key);
    await store.close();
  });

  // The stamps were listed after the alias DELETEs: a writer binding the slice again in between
  // (a load recording its object's stamp) lost its new stamp object, and the unbind counted it removed.
  it('a slice bound again once its alias objects are gone keeps the new binding\'s stamp, and is not counted removed', async () => {
    const { url, a, store } = await makeCache();
    const other = await openCacheStore(url);
    const transport = transportOf(store);
    const deleteObject = transport.deleteObject.bind(transport);
    const OTHER_ETAG = 'etag:"fedcba9876543210fedcba9876543210"';
    let fired = false;
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await deleteObject(name, beforeAttempt);
      if (!fired && name.startsWith('slices/')) {
        fired = true;
        expect(await other.aliasSlices([{ key: a.key, shardName: SHARD, offsetBytes: 0, sizeBytes: 80, stamp: OTHER_ETAG }])).toEqual([true]);
      }
      return done;
    };
    try {
      expect(await store.unbindSlices([{ shardName: SHARD, offsetBytes: 0, sizeBytes: 80, key: a.key }])).toBe(0);
      expect(fired).toBe(true);
    } finally {
      await Promise.all([store.close(), other.close()]);
    }
    const fresh = await openCacheStore(url);
    try {
      const binding = fresh.lookupSliceBinding(SHARD, 0, 80);
      expect(binding?.entry.key).toBe(a.key);
      expect(binding?.stamps).toContain(OTHER_ETAG);
    } finally {
      await fresh.close();
    }
  });

  it('refuses bad input with INVALID_ARGUMENT before any request', async () => {
    const { store } = await makeCache();
    for (const items of [[{ shardName: SHARD, offsetBytes: 1.5, sizeBytes: 80 }], [{ shardName: 'x'.repeat(600), offsetBytes: 0, sizeBytes: 80 }], [{ shardName: SHARD, offsetBytes: 0, sizeBytes: 80, key: 'nope' }]]) {
      expect((await catchError(() => store.unbindSlices(items))).code).toBe('INVALID_ARGUMENT');
    }
    expect(store.lookupBySlice(SHARD, 0, 80)).toBeDefined();
    await store.close();
  });
});
