// dropUnboundEntries on an s3:// cache paused past DROP_INTENT_STALE_MS (review R1: a laptop asleep,
// a debugger, a clock hours behind) and the blob re-checks of a drop and of gc (window (c)): forced
// with transport hooks.
import { createHash } from 'node:crypto';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { DROP_INTENT_STALE_MS } from '../src/s3-drop-intents.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00001.safetensors';
type Transport = {
  list(dir: string): Promise<{ name: string; lastModifiedMs: number }[]>;
  headObject(name: string): Promise<{ lastModifiedMs: number } | undefined>;
  deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean>;
  judgingNowMs(): number;
};
const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;
const HOUR_MS = 60 * 60 * 1000;

describeS3('S3 store: a paused drop, and the last look before a blob DELETE', () => {
  const bucket = uniqueBucket('droppaused');
  const client = rawClient();
  useTestBucket(client, bucket);
  let run = 0;
  const sha = (t: TestTensor): string => createHash('sha256').update(t.payload).digest('hex');
  const entryName = (t: TestTensor): string => `entries/${t.key}.${sha(t)}.json`;
  const blobName = (t: TestTensor): string => `blobs/${t.key}.${sha(t)}.bin`;
  const getRaw = async (key: string): Promise<Uint8Array> => (await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray();
  const putRaw = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));

  it('a drop paused past the stale age, its intent resolved meanwhile, deletes no entry: the binding made meanwhile keeps its blob', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 702);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const [resolver, writer, collector] = await Promise.all([openCacheStore(url), openCacheStore(url), openCacheStore(url)]);
    // The resolver's clock 6 h on: the drop "slept" that long after its intent PUT.
    const rt = transportOf(resolver);
    const now = rt.judgingNowMs.bind(rt);
    rt.judgingNowMs = () => now() + DROP_INTENT_STALE_MS + 60_000;
    const t = transportOf(store);
    const [del, list] = [t.deleteObject.bind(t), t.list.bind(t)];
    let paused = false;
    let bound: boolean | undefined;
    t.deleteObject = async (name, beforeAttempt) => {
      if (name === entryName(b) && !paused) {
        paused = true;
        // A gc resolves the stale intent (entry present: blob kept, intent deleted)...
        await gcBelowFloorForTests(resolver);
        // ...and a writer binds b while its entry is there: reported made.
        [bound] = await writer.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 400, sizeBytes: 80000 }]);
      }
      return del(name, beforeAttempt);
    };
    t.list = async (dir) => {
      // A gc between the drop's entry DELETE (were there one) and its put back.
      if (dir === 'slices/' && paused) await gcBelowFloorForTests(collector);
      return list(dir);
    };
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(bound).toBe(true);
    // The report says it stopped, and why: nothing deleted, nothing left to the resolver.
    expect(report.stopped).toEqual({ reason: 'intent-gone', leftToResolver: [] });
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 400, 80000)?.key).toBe(b.key);
    await reader.checkBlob(b.key);
    expect((await reader.verify()).problems).toEqual([]);
    await Promise.all([reader, resolver, writer, collector, store].map((s) => s.close()));
  });

  it('a drop whose own intent is older than half the stale age (its clock hours behind) stops before the entry DELETE', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([300, 1], 703);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const t = transportOf(store);
    const head = t.headObject.bind(t);
    // The intent's Last-Modified as the server will show it after a pause of 4 h.
    t.headObject = async (name) => {
      const found = await head(name);
      return found !== undefined && name.startsWith('dropping/') ? { ...found, lastModifiedMs: found.lastModifiedMs - 4 * HOUR_MS } : found;
    };
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.count).toBe(0);
    expect(report.stopped).toEqual({ reason: 'intent-old', leftToResolver: [] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    await store.close();
  });

  it('a drop that stops after deleting an entry names it in stopped.leftToResolver (its intent and blob stay for the resolver)', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const a = makeTensor([300, 1], 706);
    const b = makeTensor([300, 1], 707);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(a, 'a.weight'), toInput(b, 'b.weight')]);
    const t = transportOf(store);
    const [head, del] = [t.headObject.bind(t), t.deleteObject.bind(t)];
    // b's intent shows 4 h of age (a pause after its PUT); a's does not.
    t.headObject = async (name) => {
      const found = await head(name);
      return found !== undefined && name.startsWith('dropping/') && name.includes(b.key) ? { ...found, lastModifiedMs: found.lastModifiedMs - 4 * HOUR_MS } : found;
    };
    // b's entry DELETE waits for a's: a is deleted before b's look stops the batch.
    let aDeleted!: () => void;
    const aDone = new Promise<void>((resolve) => (aDeleted = resolve));
    t.deleteObject = async (name, beforeAttempt) => {
      if (name === entryName(b)) await aDone;
      const done = await del(name, beforeAttempt);
      if (name === entryName(a)) aDeleted();
      return done;
    };
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.count).toBe(0);
    expect(report.stopped).toEqual({ reason: 'intent-old', leftToResolver: [entryName(a)] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(entryName(a));
    expect(names).toContain(blobName(a));
    expect(names.filter((name) => name.startsWith('dropping/') && name.includes(a.key))).toHaveLength(1);
    expect(names).toContain(entryName(b));
    await store.close();
  });

  it('a put back whose blob is gone (a resolver beside a paused drop deleted it) puts no entry back: blobsMissing', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([300, 1], 704);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const t = transportOf(store);
    const del = t.deleteObject.bind(t);
    t.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) {
        // After the entry DELETE: a writer's alias of b (written before it looked at the entry: the
        // drop must put the entry back), and the blob goes (as a resolver's or gc's would, the drop paused).
        await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 600], 0, b.key)}`, new Uint8Array(0));
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}${blobName(b)}` }));
      }
      return done;
    };
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.blobsMissing).toEqual([blobName(b)]);
    // No entry without its blob (BLOB_MISSING for every reader): the slice resolves to nothing, read raw.
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}entries/` }));
    expect(listed.Contents ?? []).toEqual([]);
    await store.close();
  });

  /**
   * (`b` big enough not to be inlined in its entry object: its blob object is what serves it.)
   * An orphan blob of `b` (entry object deleted), old to `store`'s clock until a writer stores b
   * again inside `store`'s look at b's intents (blob PUT there, its entry PUT once `act` is done).
   */
  async function storeAgainDuringIntentLook(store: CacheStore, prefix: string, b: TestTensor, entryBytes: Uint8Array, act: () => Promise<unknown>): Promise<void> {
    const t = transportOf(store);
    const [list, nowOf] = [t.list.bind(t), t.judgingNowMs.bind(t)];
    let aheadMs = HOUR_MS;
    t.judgingNowMs = () => nowOf() + aheadMs;
    const blobBytes = await getRaw(`${prefix}${blobName(b)}`);
    let stored = false;
    t.list = async (dir) => {
      if (dir.startsWith('dropping/') && dir.includes(b.key) && !stored) {
        stored = true;
        await putRaw(`${prefix}${blobName(b)}`, blobBytes);
        aheadMs = 0;
      }
      return list(dir);
    };
    await act();
    expect(stored).toBe(true);
    await putRaw(`${prefix}${entryName(b)}`, entryBytes);
  }

  it("gc looks at an orphan blob's age last, after the entry and intents: a writer's blob PUT during those looks keeps it", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 705);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const entryBytes = await getRaw(`${prefix}${entryName(b)}`);
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(b)}` }));
    const collector = await openCacheStore(url);
    await storeAgainDuringIntentLook(collector, prefix, b, entryBytes, () => gcBelowFloorForTests(collector, { minAgeMs: 10 * 60 * 1000 }));
    const reader = await openCacheStore(url);
    await reader.checkBlob(b.key);
    await Promise.all([reader, collector, store].map((s) => s.close()));
  });

  it("a drop looks at a dropped entry's blob age last: a writer storing the key again during its looks keeps the blob", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 706);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const entryBytes = await getRaw(`${prefix}${entryName(b)}`);
    const dropper = await openCacheStore(url);
    await storeAgainDuringIntentLook(dropper, prefix, b, entryBytes, () =>
      (dropper as S3CacheStore).dropUnboundEntries({ minAgeMs: 10 * 60 * 1000, allowMinAgeBelowFloorForTests: true }),
    );
    const reader = await openCacheStore(url);
    await reader.checkBlob(b.key);
    await Promise.all([reader, dropper, store].map((s) => s.close()));
  });
});
