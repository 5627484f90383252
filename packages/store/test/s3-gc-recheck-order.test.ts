// gc's re-checks before deleting stamps, shadowed aliases and orphan blobs on an s3:// cache, and the
// drop's judged_at_ms (README "S3 layout", Removing entries, step 9; review R1b's L1, L2, L5).
import { createHash } from 'node:crypto';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { CLOCK_OFFSET_NOISE_MS, openCacheStore, type CacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { decodeDropIntent } from '../src/s3-drop-intents.js';
import { sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00001.safetensors';
type Transport = {
  list(dir: string): Promise<unknown[]>;
  headObject(name: string): Promise<unknown>;
  putObject(name: string, body: Uint8Array, contentType?: string): Promise<void>;
};
const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;

describeS3('S3 store: gc re-checks entry, intents, entry; what gc counts; the drop judged_at_ms', () => {
  const bucket = uniqueBucket('gcrecheck');
  const client = rawClient();
  useTestBucket(client, bucket);
  let run = 0;
  const sha = (t: TestTensor): string => createHash('sha256').update(t.payload).digest('hex');
  const entryName = (t: TestTensor): string => `entries/${t.key}.${sha(t)}.json`;
  const blobName = (t: TestTensor): string => `blobs/${t.key}.${sha(t)}.bin`;
  const putRaw = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  const deleteRaw = (key: string) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  const getRaw = async (key: string) => (await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray();

  /** A drop that puts `t`'s entry back and removes its intent while gc lists the key's intents. */
  function putBackDuringIntentLook(store: CacheStore, prefix: string, t: TestTensor, bytes: Uint8Array): void {
    const transport = transportOf(store);
    const list = transport.list.bind(transport);
    let done = false;
    transport.list = async (dir) => {
      const listed = await list(dir);
      if (dir === `dropping/${t.key}.` && !done) {
        done = true;
        await putRaw(`${prefix}${entryName(t)}`, bytes);
      }
      return listed;
    };
  }

  it("gc keeps a stamp whose key's entry a drop put back between gc's entry and intent looks (it looks at the entry again)", async () => {
    const prefix = `p${run++}/`;
    const b = makeTensor([40000, 1], 2101);
    const store = await openCacheStore(`s3://${bucket}/${prefix}`, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    const stamp = stampObjectName([SHARD, 0, 80000], b.key, `etag:"${'c'.repeat(32)}"`, prefix);
    await putRaw(`${prefix}${stamp}`, new Uint8Array(0));
    const bytes = await getRaw(`${prefix}${entryName(b)}`);
    await deleteRaw(`${prefix}${entryName(b)}`);
    putBackDuringIntentLook(store, prefix, b, bytes);
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanStamps).toEqual([]);
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${stamp}` }));
    expect((listed.Contents ?? []).map((o) => o.Key)).toEqual([`${prefix}${stamp}`]);
    await store.close();
  });

  it("gc keeps a shadowed alias whose key's entry a drop put back between gc's entry and intent looks", async () => {
    const prefix = `p${run++}/`;
    const b = makeTensor([40000, 1], 2201);
    const c = makeTensor([40000, 1], 2202);
    const store = await openCacheStore(`s3://${bucket}/${prefix}`, { create: true });
    await store.addEntries([toInput(b, 'b.weight'), toInput(c, 'c.weight')]);
    const shadowed = sliceObjectName([SHARD, 0, 80000], 0, b.key);
    await putRaw(`${prefix}${shadowed}`, new Uint8Array(0));
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 1, c.key)}`, new Uint8Array(0));
    const bytes = await getRaw(`${prefix}${entryName(b)}`);
    await deleteRaw(`${prefix}${entryName(b)}`);
    putBackDuringIntentLook(store, prefix, b, bytes);
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanAliases).toEqual([]);
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${shadowed}` }));
    expect((listed.Contents ?? []).map((o) => o.Key)).toEqual([`${prefix}${shadowed}`]);
    await store.close();
  });

  it('an orphan blob found gone at gc\'s last look is not counted as deleted by gc (orphanBlobs, orphanBytes)', async () => {
    const prefix = `p${run++}/`;
    const b = makeTensor([40000, 1], 2301);
    const store = await openCacheStore(`s3://${bucket}/${prefix}`, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await deleteRaw(`${prefix}${entryName(b)}`);
    const transport = transportOf(store);
    const head = transport.headObject.bind(transport);
    transport.headObject = async (name) => {
      // Another gc deletes the blob just before this one's last look.
      if (name === blobName(b)) await deleteRaw(`${prefix}${blobName(b)}`);
      return head(name);
    };
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanBlobs).toEqual([]);
    expect(report.orphanBytes).toBe(0);
    await store.close();
  });

  it("the drop's intent judged_at_ms is its judging listing's start less 1 s and CLOCK_OFFSET_NOISE_MS", async () => {
    const prefix = `p${run++}/`;
    const b = makeTensor([40000, 1], 2401);
    const store = await openCacheStore(`s3://${bucket}/${prefix}`, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const listingNowMs = 1_900_000_000_000;
    (store as unknown as { listingNowMs(startedMs: number): number }).listingNowMs = () => listingNowMs;
    const transport = transportOf(store);
    const put = transport.putObject.bind(transport);
    const intents: Uint8Array[] = [];
    transport.putObject = async (name, body, contentType) => {
      if (name.startsWith('dropping/')) intents.push(body);
      return put(name, body, contentType);
    };
    await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(intents).toHaveLength(1);
    expect(decodeDropIntent(intents[0]!)?.judgedAtMs).toBe(listingNowMs - 1000 - CLOCK_OFFSET_NOISE_MS);
    await store.close();
  });
});
