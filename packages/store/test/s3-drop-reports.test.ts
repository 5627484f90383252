// What an s3:// gc and drop report of killed drops' intents they resolved (put back, blob deleted,
// a failure) and of the bytes a drop reclaimed (README "S3 layout", Removing entries). Intents are
// made by hand: a killed drop's, its entry object deleted.
import { createHash } from 'node:crypto';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { StoreError } from '../src/errors.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { DROP_INTENT_STALE_MS, encodeDropIntent } from '../src/s3-drop-intents.js';
import { dropIntentObjectName, sliceObjectName, stampObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00001.safetensors';
type Transport = { judgingNowMs(): number; getSmallObject(name: string, maxBytes: number): Promise<Uint8Array | undefined> };
const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;

/** This handle's clock past DROP_INTENT_STALE_MS ahead: every intent is stale to it. */
function runPastStale(store: CacheStore): void {
  const transport = transportOf(store);
  const now = transport.judgingNowMs.bind(transport);
  transport.judgingNowMs = () => now() + DROP_INTENT_STALE_MS + 60_000;
}

describeS3('S3 store: reports of resolved drop intents and reclaimed bytes', () => {
  const bucket = uniqueBucket('dropreports');
  const client = rawClient();
  useTestBucket(client, bucket);
  let run = 0;
  const sha = (t: TestTensor): string => createHash('sha256').update(t.payload).digest('hex');
  const entryName = (t: TestTensor): string => `entries/${t.key}.${sha(t)}.json`;
  const blobName = (t: TestTensor): string => `blobs/${t.key}.${sha(t)}.bin`;
  const putRaw = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  const deleteRaw = (key: string) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));

  /** A cache holding `b` (bound or not) and `c` unbound, each under a killed drop's intent, their entry objects gone. */
  async function killedDropOf(bBound: boolean) {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 801 + run);
    const c = makeTensor([40000, 1], 901 + run);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight'), toInput(c, 'c.weight')]);
    if (bBound) await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    for (const t of [b, c]) {
      const bytes = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(t)}` }))).Body!.transformToByteArray();
      await putRaw(`${prefix}${dropIntentObjectName(entryName(t), '0123456789ab')}`, encodeDropIntent(bytes, Date.now() - 1000));
      await deleteRaw(`${prefix}${entryName(t)}`);
    }
    await store.close();
    return { url, b, c };
  }

  it("gc reports what resolving a killed drop's intents did: the bound entry put back, the unbound one's blob deleted", async () => {
    const { url, b, c } = await killedDropOf(true);
    const collector = await openCacheStore(url);
    runPastStale(collector);
    const report = await gcBelowFloorForTests(collector);
    expect(report.staleDropIntents).toHaveLength(2);
    expect(report.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [blobName(c)], blobsMissing: [] });
    await collector.close();
  });

  it("a drop reports the killed drop's intents it resolved first, and what that did", async () => {
    const { url, b, c } = await killedDropOf(true);
    const dropper = await openCacheStore(url);
    runPastStale(dropper);
    const report = await (dropper as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.staleDropIntents).toHaveLength(2);
    expect(report.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [blobName(c)], blobsMissing: [] });
    await dropper.close();
  });

  it("gc's report survives a failure resolving an intent: the failure is a field, the deletions before it reported", async () => {
    const { url, b } = await killedDropOf(true);
    // An orphan blob for gc to delete before it resolves the intents.
    const d = makeTensor([40000, 1], 999);
    const writer = await openCacheStore(url);
    await writer.addEntries([toInput(d, 'd.weight')]);
    await writer.close();
    const prefix = url.slice(`s3://${bucket}/`.length);
    await deleteRaw(`${prefix}${entryName(d)}`);
    const collector = await openCacheStore(url);
    runPastStale(collector);
    const transport = transportOf(collector);
    const get = transport.getSmallObject.bind(transport);
    transport.getSmallObject = async (name, maxBytes) => {
      if (name.startsWith('dropping/') && name.includes(b.key)) throw new StoreError('S3_UNAVAILABLE', 'the server went away (a test)');
      return get(name, maxBytes);
    };
    const report = await gcBelowFloorForTests(collector);
    expect(report.orphanBlobs).toContain(blobName(d));
    expect(report.staleDropResolution?.error?.code).toBe('S3_UNAVAILABLE');
    expect(report.staleDropResolution?.restored).toEqual([]);
    await collector.close();
  });

  it('reclaimedBytes counts only the blobs the drop deleted, not one gone already', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1001);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await deleteRaw(`${prefix}${blobName(b)}`);
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.count).toBe(1);
    expect(report.reclaimedBytes).toBe(0);
    await store.close();
  });

  it("gc keeps the stamp objects of a binding whose entry object is under a drop's intent (the drop may put it back)", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1101);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    const stamp = stampObjectName([SHARD, 0, 80000], b.key, `etag:"${'c'.repeat(32)}"`, prefix);
    await putRaw(`${prefix}${stamp}`, new Uint8Array(0));
    // A live drop between its entry DELETE and its put back: its intent, the entry object gone.
    const bytes = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(b)}` }))).Body!.transformToByteArray();
    await putRaw(`${prefix}${dropIntentObjectName(entryName(b), '0123456789ab')}`, encodeDropIntent(bytes, Date.now() - 1000));
    await deleteRaw(`${prefix}${entryName(b)}`);
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanStamps).toEqual([]);
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}${stamp}` }));
    expect((listed.Contents ?? []).map((o) => o.Key)).toEqual([`${prefix}${stamp}`]);
    await store.close();
  });

  it("verify lists entries/ before dropping/: a drop's entry DELETE between the listings is no dangling binding", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1201);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    const bytes = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(b)}` }))).Body!.transformToByteArray();
    const verifier = await openCacheStore(url);
    const transport = transportOf(verifier) as unknown as { list(dir: string): Promise<unknown[]> };
    const list = transport.list.bind(transport);
    let droppingListed: Promise<unknown> | undefined;
    let dropped = false;
    // A drop's intent PUT and entry DELETE, right before verify's listing of entries/, after its
    // listing of dropping/ when that was started first (old code: the three in parallel).
    const dropNow = async () => {
      if (dropped) return;
      dropped = true;
      await putRaw(`${prefix}${dropIntentObjectName(entryName(b), '0123456789ab')}`, encodeDropIntent(bytes, Date.now() - 1000));
      await deleteRaw(`${prefix}${entryName(b)}`);
    };
    // Armed only for verify's look for dangling bindings (its other listings come first).
    let armed = false;
    const finder = verifier as unknown as { findDanglingBindings(): Promise<unknown[]> };
    const find = finder.findDanglingBindings.bind(verifier);
    finder.findDanglingBindings = () => ((armed = true), find());
    transport.list = async (dir) => {
      if (!armed) return list(dir);
      if (dir === 'dropping/') return (droppingListed = list(dir));
      if (dir === 'entries/') {
        await null;
        if (droppingListed !== undefined) await droppingListed;
        await dropNow();
      }
      return list(dir);
    };
    const report = await verifier.verify();
    expect(dropped).toBe(true);
    expect(report.problems.filter((p) => p.code === 'ENTRY_NOT_FOUND')).toEqual([]);
    await Promise.all([verifier, store].map((s) => s.close()));
  });

  it("a stale intent whose bytes are no valid entry object (damaged), its key bound, its entry absent: intentsInvalid and entriesLost, never put back, the intent deleted", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1301);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    const intent = dropIntentObjectName(entryName(b), '0123456789ab');
    await putRaw(`${prefix}${intent}`, new TextEncoder().encode('{"damaged": true}'));
    await deleteRaw(`${prefix}${entryName(b)}`);
    runPastStale(store);
    const report = await gcBelowFloorForTests(store);
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent], entriesLost: [entryName(b)] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(entryName(b));
    expect(names).not.toContain(intent);
    await store.close();
  });

  it("a stale intent holding an entry object's bytes bare (not splitzip-drop-intent/1: no release wrote those) is damaged: intentsInvalid and entriesLost, never put back, the intent deleted", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1351);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
    const bytes = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(b)}` }))).Body!.transformToByteArray();
    const intent = dropIntentObjectName(entryName(b), '0123456789ab');
    await putRaw(`${prefix}${intent}`, bytes);
    await deleteRaw(`${prefix}${entryName(b)}`);
    runPastStale(store);
    const report = await gcBelowFloorForTests(store);
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent], entriesLost: [entryName(b)] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(entryName(b));
    expect(names).not.toContain(intent);
    await store.close();
  });

  it('a drop PUTs no intent of bytes that fail the entry checks (read back damaged) and leaves that entry', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1401);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const transport = transportOf(store);
    const get = transport.getSmallObject.bind(transport);
    transport.getSmallObject = async (name, maxBytes) => (name === entryName(b) ? new TextEncoder().encode('{"damaged": true}') : get(name, maxBytes));
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(report.count).toBe(0);
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    await store.close();
  });

  it("a killed drop's intent is judged from the drop's judging listing: an alias written between that listing and the intent PUT (hidden below another's) counts as bound", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1501);
    const c = makeTensor([40000, 1], 1502);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const transport = transportOf(store) as unknown as {
      putObject(name: string, body: Uint8Array, contentType?: string): Promise<void>;
      list(dir: string): Promise<unknown[]>;
    };
    const [put, list] = [transport.putObject.bind(transport), transport.list.bind(transport)];
    let aliased = false;
    transport.putObject = async (name, body, contentType) => {
      if (name.startsWith('dropping/') && !aliased) {
        aliased = true;
        // A writer binds b after the judging listing, before the intent PUT (its alias a whole
        // second older than the intent, as Last-Modified goes; it saw the entry: reported made).
        // Another writer's rebind one epoch above hides it from "at the top epoch" (R3).
        await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
        await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 1, c.key)}`, new Uint8Array(0));
        await new Promise((resolve) => setTimeout(resolve, 2100));
      }
      return put(name, body, contentType);
    };
    let deleted = false;
    transport.list = async (dir) => {
      if (dir === 'slices/' && aliased && !deleted) {
        deleted = true;
        throw new StoreError('S3_UNAVAILABLE', 'the drop was killed here (a test)');
      }
      return list(dir);
    };
    await expect((store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true })).rejects.toThrow('killed');
    await store.close();
    const collector = await openCacheStore(url);
    runPastStale(collector);
    const report = await gcBelowFloorForTests(collector);
    expect(report.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [], blobsMissing: [] });
    const reader = await openCacheStore(url);
    expect(reader.getEntry(b.key)).toBeDefined();
    await reader.checkBlob(b.key);
    await Promise.all([reader, collector].map((s) => s.close()));
  });

  it('a put back refused once (a 409: another conditional write of it racing) with the entry still absent is tried again', async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1601);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const transport = transportOf(store) as unknown as {
      deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean>;
      putObjectIfAbsent(name: string, body: Uint8Array, contentType?: string): Promise<'created' | 'exists' | 'unsupported'>;
    };
    const [del, putIfAbsent] = [transport.deleteObject.bind(transport), transport.putObjectIfAbsent.bind(transport)];
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      // After the entry DELETE a writer's alias of b: the drop puts the entry back.
      if (name === entryName(b)) await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
      return done;
    };
    let refused = 0;
    transport.putObjectIfAbsent = async (name, body, contentType) => {
      // The transport answers 'exists' for a 409 too; the racing write then failed: nothing there.
      if (name === entryName(b) && refused++ === 0) return 'exists';
      return putIfAbsent(name, body, contentType);
    };
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(refused).toBe(2);
    expect(report.count).toBe(0);
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 0, 80000)?.key).toBe(b.key);
    await reader.checkBlob(b.key);
    await Promise.all([reader, store].map((s) => s.close()));
  });
  it("a put back refused every time (409s) with the entry still absent is a restoreConflict: the intent stays and a later resolver puts the entry back", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1701);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const transport = transportOf(store) as unknown as {
      deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean>;
      putObjectIfAbsent(name: string, body: Uint8Array, contentType?: string): Promise<'created' | 'exists' | 'unsupported'>;
    };
    const [del, putIfAbsent] = [transport.deleteObject.bind(transport), transport.putObjectIfAbsent.bind(transport)];
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) await putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`, new Uint8Array(0));
      return done;
    };
    let refused = 0;
    transport.putObjectIfAbsent = async (name, body, contentType) => (name === entryName(b) ? (refused++, 'exists') : putIfAbsent(name, body, contentType));
    const report = await (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    expect(refused).toBe(4);
    expect(report.count).toBe(0);
    expect(report.restoreConflicts).toEqual([entryName(b)]);
    let listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    let names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(entryName(b));
    expect(names.filter((n) => n.startsWith('dropping/'))).toHaveLength(1);
    await store.close();
    // A resolver refused the same way keeps the intent and reports it too.
    const refusing = await openCacheStore(url);
    runPastStale(refusing);
    const refusingTransport = transportOf(refusing) as unknown as typeof transport;
    refusingTransport.putObjectIfAbsent = async () => 'exists';
    const refusedReport = await gcBelowFloorForTests(refusing);
    expect(refusedReport.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], restoreConflicts: [entryName(b)] });
    await refusing.close();
    const collector = await openCacheStore(url);
    runPastStale(collector);
    const gcReport = await gcBelowFloorForTests(collector);
    expect(gcReport.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [], blobsMissing: [] });
    listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names.filter((n) => n.startsWith('dropping/'))).toEqual([]);
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 0, 80000)?.key).toBe(b.key);
    await reader.checkBlob(b.key);
    await Promise.all([reader, collector].map((s) => s.close()));
  });
  it("a damaged stale intent of an unbound key is resolved by its name: the blob rule (blob deleted), the intent deleted", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1801);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const intent = dropIntentObjectName(entryName(b), '0123456789ab');
    await putRaw(`${prefix}${intent}`, new TextEncoder().encode('{"damaged": true}'));
    await deleteRaw(`${prefix}${entryName(b)}`);
    runPastStale(store);
    const report = await gcBelowFloorForTests(store);
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [blobName(b)], blobsMissing: [], intentsInvalid: [intent] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(intent);
    expect(names).not.toContain(blobName(b));
    await store.close();
  });

  it("a damaged stale intent whose entry object is present is deleted, the entry and blob kept", async () => {
    const prefix = `p${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const b = makeTensor([40000, 1], 1901);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(b, 'b.weight')]);
    const intent = dropIntentObjectName(entryName(b), '0123456789ab');
    await putRaw(`${prefix}${intent}`, new TextEncoder().encode('{"damaged": true}'));
    runPastStale(store);
    const report = await gcBelowFloorForTests(store);
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent] });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const names = (listed.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
    expect(names).not.toContain(intent);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    await store.close();
  });
});
