// gc of an s3:// cache removes alias objects below their slice's top epoch whose key has no entry
// object (left by dropUnboundEntries of a key that was rebound away: they bind nothing, cost listing
// time, and would bind the key again should the objects above them go), and never one that binds
// or may bind: at the top epoch, or whose key has an entry object.
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

describeS3('S3 store: gc removes shadowed alias objects of dropped keys', () => {
  const bucket = uniqueBucket('gcalias');
  const client = rawClient();
  let run = 0;
  const shard = 'model-00001-of-00002.safetensors';
  const s1 = [shard, 0, 80] as [string, number, number];
  const s2 = [shard, 80, 80] as [string, number, number];
  useTestBucket(client, bucket);

  async function aliasObjects(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}slices/` }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }

  /** K1 bound to s1 at epoch 0, rebound to K2 (epoch 1), K1's entry dropped; a top-epoch alias of a key with no entry at s2. */
  async function droppedBelowTop() {
    const prefix = `r${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const store = (await openCacheStore(url, { create: true })) as S3CacheStore;
    const [k1, k2, k9] = [makeTensor([40], 801), makeTensor([40], 802), makeTensor([40], 809)];
    await store.addEntries([toInput(k1, 'a', [s1]), toInput(k2, 'b')]);
    expect(await store.aliasSlices([{ key: k2.key, shardName: s1[0], offsetBytes: s1[1], sizeBytes: s1[2] }], { rebind: true })).toEqual([true]);
    const shadowed = sliceObjectName(s1, 0, k1.key);
    const top = sliceObjectName(s1, 1, k2.key);
    const unbacked = sliceObjectName(s2, 0, k9.key);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${unbacked}`, Body: new Uint8Array(0) }));
    // K1 still has its entry: its shadowed alias stays.
    expect((await gcBelowFloorForTests(store, { dryRun: true })).orphanAliases).toEqual([]);
    const dropped = await store.dropUnboundEntries({ exclusive: true, minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(dropped.entries.map((e) => e.key)).toEqual([k1.key]);
    expect(await aliasObjects(prefix)).toEqual([shadowed, top, unbacked].sort());
    return { prefix, url, store, k2, shadowed, top, unbacked };
  }

  it('a dry run names it, a real run deletes it; the binding above and a top-epoch alias of a key without an entry stay', async () => {
    const { prefix, url, store, k2, shadowed, top, unbacked } = await droppedBelowTop();
    const dry = await gcBelowFloorForTests(store, { dryRun: true });
    expect(dry.orphanAliases).toEqual([shadowed]);
    expect(await aliasObjects(prefix)).toEqual([shadowed, top, unbacked].sort());
    // Younger than minAgeMs: kept, and counted.
    expect(await store.gc({ dryRun: true, minAgeMs: 3_600_000 })).toMatchObject({ orphanAliases: [], keptYoung: { orphanAliases: 1 } });
    const real = await gcBelowFloorForTests(store);
    expect(real.orphanAliases).toEqual([shadowed]);
    expect(await aliasObjects(prefix)).toEqual([top, unbacked].sort());
    const reader = await openCacheStore(url);
    try {
      expect(reader.lookupBySlice(...s1)?.key).toBe(k2.key);
      expect(reader.lookupBySlice(...s2)).toBeUndefined();
    } finally {
      await reader.close();
    }
    await store.close();
  });

  it('one that is at its top epoch when gc looks before deleting (the objects above it went) is kept', async () => {
    const { prefix, store, shadowed, top, unbacked } = await droppedBelowTop();
    const transport = (store as unknown as { transport: { headObject: (name: string) => Promise<unknown> } }).transport;
    const head = transport.headObject.bind(transport);
    transport.headObject = async (name) => {
      // An unbindSlices of s1 between gc's listing and its look.
      if (name === shadowed) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}${top}` }));
      return head(name);
    };
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanAliases).toEqual([]);
    expect(await aliasObjects(prefix)).toEqual([shadowed, unbacked].sort());
    await store.close();
  });
});
