// dropUnboundEntries on an s3:// cache (no writer lock): exactly the old unbound entries go, with
// their blobs; bound, conflicted, empty-tensor and young entries stay; a dry run changes nothing.
// Beside writers: an alias written between the drop's DELETE and its second listing puts the entry
// back (its blob kept); one written after it answers false (the writer's own alias goes); an entry
// object or a blob a writer stored again after the listing is kept. The cache verifies after each.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import type { S3CacheStore, S3DropUnboundEntriesOptions } from '../src/s3-cache-store.js';
import { StoreError } from '../src/errors.js';
import { sliceObjectName } from '../src/s3-layout.js';
import type { DropUnboundEntriesReport } from '../src/types.js';
import { barrier, deferred, holdAliasPut } from './s3-alias-hooks.js';
import { catchError, makeTensor, toInput, type TestTensor } from './helpers.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00001.safetensors';

type Transport = {
  list(dir: string): Promise<{ name: string }[]>;
  putObject(name: string, body: Uint8Array, contentType?: string): Promise<void>;
  deleteObject(name: string, beforeAttempt?: () => Promise<boolean>): Promise<boolean>;
};
const transportOf = (store: CacheStore): Transport => (store as unknown as { transport: Transport }).transport;

/**
 * A drop with a `minAgeMs` below MIN_S3_GC_AGE_MS (default 0): no writer is at work but the test's
 * own. `exclusive: true` (required until 2026-12-07, no effect since) stays passed, as old callers do.
 */
function dropBelowFloor(store: CacheStore, options: S3DropUnboundEntriesOptions = {}): Promise<DropUnboundEntriesReport> {
  return (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, exclusive: true, ...options, allowMinAgeBelowFloorForTests: true });
}

/** Counts the transport's DELETE and PUT calls (a refusal must come before either). */
function countWrites(store: CacheStore): { deletes: string[]; puts: string[] } {
  const transport = transportOf(store);
  const [del, put] = [transport.deleteObject.bind(transport), transport.putObject.bind(transport)];
  const seen = { deletes: [] as string[], puts: [] as string[] };
  transport.deleteObject = (name, beforeAttempt) => (seen.deletes.push(name), del(name, beforeAttempt));
  transport.putObject = (name, body, contentType) => (seen.puts.push(name), put(name, body, contentType));
  return seen;
}

describeS3('S3 store: dropUnboundEntries', () => {
  const bucket = uniqueBucket('dropunb');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);

  async function listNames(prefix: string): Promise<string[]> {
    const out = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    return (out.Contents ?? []).map((o) => o.Key!.slice(prefix.length)).sort();
  }

  const payloadSha256 = (t: TestTensor): string => createHash('sha256').update(t.payload).digest('hex');
  const blobName = (t: TestTensor): string => `blobs/${t.key}.${payloadSha256(t)}.bin`;
  const entryName = (t: TestTensor): string => `entries/${t.key}.${payloadSha256(t)}.json`;

  /**
   * `a` bound at 0; `b` and `c` bound to nothing; `d` bound at 160, where `f` also has an alias of
   * the same epoch (a conflict: either may win its rebind, so both count as bound); `e` an empty
   * tensor's entry (never bound).
   */
  async function makeCache() {
    const prefix = `d${run++}/`;
    const url = `s3://${bucket}/${prefix}`;
    const [a, b, c, d, f] = [601, 602, 603, 604, 605].map((seed) => makeTensor([40, 1], seed)) as [TestTensor, TestTensor, TestTensor, TestTensor, TestTensor];
    const e = makeTensor([0, 1], 606);
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(a, 'a.weight', [[SHARD, 0, 80]]), toInput(b, 'b.weight'), toInput(c, 'c.weight'), toInput(d, 'd.weight', [[SHARD, 160, 80]]), toInput(f, 'f.weight'), toInput(e, 'e.weight')]);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName([SHARD, 160, 80], 0, f.key)}`, Body: new Uint8Array(0) }));
    await store.refresh();
    return { prefix, url, store, a, b, c, d, e, f };
  }

  /** verify of a fresh handle: ok, but for the conflict makeCache made on purpose. */
  async function expectVerifies(url: string): Promise<void> {
    const reader = await openCacheStore(url);
    const report = await reader.verify();
    expect(report.problems.filter((p) => p.code !== 'SLICE_CONFLICT')).toEqual([]);
    await reader.close();
  }

  it('a dry run changes nothing; the drop removes the old unbound entries and their blobs, keeps bound, conflicted and empty-tensor ones; a second run removes none', async () => {
    const { prefix, url, store, a, b, c, d, e, f } = await makeCache();
    const before = await listNames(prefix);
    const dry = await dropBelowFloor(store, { dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, count: 2, blobsLeft: [] });
    expect(dry.entries.map((x) => x.qualname).sort()).toEqual(['b.weight', 'c.weight']);
    expect(dry.reclaimedBytes).toBe(b.payload.length + c.payload.length);
    expect(await listNames(prefix)).toEqual(before);

    const done = await dropBelowFloor(store);
    expect(done).toEqual({ ...dry, dryRun: false });
    const after = await listNames(prefix);
    expect(before.filter((name) => !after.includes(name)).sort()).toEqual([blobName(b), blobName(c), entryName(b), entryName(c)].sort());
    expect(after.filter((name) => !before.includes(name))).toEqual([]);
    expect(store.getEntry(b.key)).toBeUndefined();
    expect(store.getEntry(c.key)).toBeUndefined();
    for (const kept of [a, d, e, f]) expect(store.getEntry(kept.key)).toBeDefined();
    expect(store.lookupBySlice(SHARD, 0, 80)?.key).toBe(a.key);
    await expectVerifies(url);
    expect(await dropBelowFloor(store)).toMatchObject({ count: 0, entries: [] });
    await store.close();
  });

  it('runs without exclusive (accepted, no effect; not a boolean: INVALID_ARGUMENT); the real run removes what the dry run reported', async () => {
    const { store } = await makeCache();
    const writes = countWrites(store);
    const options = { minAgeMs: 0, allowMinAgeBelowFloorForTests: true };
    expect(await catchError(() => (store as S3CacheStore).dropUnboundEntries({ ...options, exclusive: 'yes' } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'exclusive' } });
    expect(writes).toEqual({ deletes: [], puts: [] });
    const dry = await (store as S3CacheStore).dropUnboundEntries({ ...options, dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, count: 2 });
    expect(await (store as S3CacheStore).dropUnboundEntries(options)).toEqual({ ...dry, dryRun: false });
    await store.close();
  });

  it('runs on a cache written to a moment ago (no recent-writes refusal since 2026-12-07), keeping entry objects younger than minAgeMs; a minAgeMs below the floor is refused without the test option', async () => {
    const { prefix, url, store } = await makeCache();
    const before = await listNames(prefix);
    const writes = countWrites(store);
    // Just built: every entry object is younger than a minute, so none goes, and nothing is written.
    for (const dryRun of [false, true]) expect(await dropBelowFloor(store, { minAgeMs: 60_000, dryRun, exclusive: undefined })).toMatchObject({ dryRun, count: 0 });
    expect(writes).toEqual({ deletes: [], puts: [] });
    expect(await listNames(prefix)).toEqual(before);
    // A loader records a stamp: no refusal; the old unbound entries go.
    await sleep(2600);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}stamps/recorded-by-a-loader`, Body: new Uint8Array(1) }));
    expect(await dropBelowFloor(store, { minAgeMs: 1500, exclusive: undefined })).toMatchObject({ dryRun: false, count: 2 });
    // (Not a stamp name verify takes: it goes before the check below.)
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}stamps/recorded-by-a-loader` }));
    const refused = await catchError(() => store.dropUnboundEntries({ minAgeMs: 60_000 }));
    expect(refused).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'minAgeMs', floor: 35 * 60_000 } });
    expect(await catchError(() => store.dropUnboundEntries({ force: true } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('unknown option "force"') });
    await expectVerifies(url);
    await store.close();
  });

  it("puts back an entry a writer bound between the drop's DELETE and its second listing, and keeps its blob; the writer's alias stands", async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const writer = await openCacheStore(url);
    const deletedEntry = deferred();
    const aliasPut = deferred();
    const restored = deferred();
    const dropDone = deferred();
    // The writer found `b` (its listing) and PUTs its alias once the drop has deleted b's entry
    // object; it lists again only once the drop has put the entry back.
    holdAliasPut(writer, {
      before: () => deletedEntry.promise,
      after: async () => {
        aliasPut.resolve();
        await Promise.race([restored.promise, dropDone.promise]);
      },
    });
    const transport = transportOf(store);
    const [del, list, put] = [transport.deleteObject.bind(transport), transport.list.bind(transport), transport.putObject.bind(transport)];
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) deletedEntry.resolve();
      return done;
    };
    let listedAfterDelete = false;
    transport.list = async (dir) => {
      // The drop's second listing of slices/ (after its DELETEs): the writer's alias is there by then.
      if (dir === 'slices/' && (await Promise.race([deletedEntry.promise.then(() => true), sleep(0).then(() => false)])) && !listedAfterDelete) {
        listedAfterDelete = true;
        await aliasPut.promise;
      }
      return list(dir);
    };
    transport.putObject = async (name, body, contentType) => {
      await put(name, body, contentType);
      if (name === entryName(b)) restored.resolve();
    };
    const bound = writer.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 400, sizeBytes: 80 }]);
    const report = await dropBelowFloor(store).finally(dropDone.resolve);
    expect(await bound).toEqual([true]);
    expect(report.entries.map((x) => x.key)).toEqual([c.key]);
    const names = await listNames(prefix);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    expect(names).not.toContain(entryName(c));
    expect(names).not.toContain(blobName(c));
    // The restored object is the one the writer found, byte for byte (its inline payload included).
    const body = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${entryName(b)}` }));
    expect(JSON.parse(await body.Body!.transformToString())).toMatchObject({ qualname: 'b.weight' });
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 400, 80)?.key).toBe(b.key);
    await reader.close();
    await expectVerifies(url);
    await writer.close();
    await store.close();
  });

  it('a writer whose alias (aliasSlices, or addEntries of an existing key) lands after the drop answers false, and its alias object goes; the cache verifies', async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const aliasing = await openCacheStore(url);
    const adding = await openCacheStore(url);
    const dropped = deferred();
    // Both found the entries (their listings), and PUT their aliases once the drop is over.
    const bothListed = barrier(3);
    holdAliasPut(aliasing, { before: async () => void (await Promise.all([bothListed(), dropped.promise])) });
    holdAliasPut(adding, { before: async () => void (await Promise.all([bothListed(), dropped.promise])) });
    const bound = aliasing.aliasSlices([{ key: b.key, shardName: SHARD, offsetBytes: 400, sizeBytes: 80 }]);
    const added = adding.addEntries([toInput(c, 'c.weight', [[SHARD, 480, 80]])]);
    await bothListed();
    const report = await dropBelowFloor(store);
    dropped.resolve();
    expect(report.entries.map((x) => x.key).sort()).toEqual([b.key, c.key].sort());
    expect(await bound).toEqual([false]);
    expect(await added).toEqual([{ key: c.key, added: false, slicesBound: 0 }]);
    // No alias object names a gone entry: the slice is bound to nothing, the entries and blobs are gone.
    const names = await listNames(prefix);
    expect(names.filter((name) => name.includes(b.key) || name.includes(c.key))).toEqual([]);
    expect(aliasing.getEntry(b.key)).toBeUndefined();
    expect(adding.getEntry(c.key)).toBeUndefined();
    await expectVerifies(url);
    await aliasing.close();
    await adding.close();
    await store.close();
  });

  it("a DELETE that fails stops the drop after its second listing: an entry bound meanwhile is put back, no blob goes, and the error is thrown", async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const transport = transportOf(store);
    const del = transport.deleteObject.bind(transport);
    const deletedB = deferred();
    transport.deleteObject = async (name, beforeAttempt) => {
      if (name === entryName(c)) {
        // Once b's entry object is gone: a writer binds b (it had found it), and c's DELETE fails.
        await deletedB.promise;
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`, Body: new Uint8Array(0) }));
        throw new StoreError('S3_UNAVAILABLE', 'DeleteObject failed (a test fault)');
      }
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) deletedB.resolve();
      return done;
    };
    const error = await catchError(() => dropBelowFloor(store));
    expect(error).toMatchObject({ code: 'S3_UNAVAILABLE', message: expect.stringContaining('a test fault') });
    const names = await listNames(prefix);
    for (const t of [b, c]) {
      expect(names).toContain(entryName(t));
      expect(names).toContain(blobName(t));
    }
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 400, 80)?.key).toBe(b.key);
    await reader.close();
    await expectVerifies(url);
    await store.close();
  });

  it('a DELETE that fails and the second listing failing too: the first failure is thrown, saying the listing failed after it (details.relistError); no blob goes', async () => {
    const { prefix, store, b, c } = await makeCache();
    const transport = transportOf(store);
    const [del, list] = [transport.deleteObject.bind(transport), transport.list.bind(transport)];
    const deletedB = deferred();
    let deleting = false;
    transport.deleteObject = async (name, beforeAttempt) => {
      deleting = true;
      if (name === entryName(c)) {
        await deletedB.promise;
        throw new StoreError('S3_UNAVAILABLE', 'DeleteObject failed (a test fault)');
      }
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) deletedB.resolve();
      return done;
    };
    transport.list = async (dir) => {
      if (dir === 'slices/' && deleting) throw new StoreError('S3_ERROR', 'ListObjectsV2 failed (a second test fault)');
      return list(dir);
    };
    const error = await catchError(() => dropBelowFloor(store));
    expect(error).toMatchObject({ code: 'S3_UNAVAILABLE', details: { relistError: { code: 'S3_ERROR', message: expect.stringContaining('a second test fault') }, deletedEntries: 1 } });
    expect(error.message).toMatch(/a test fault\); slices\/ could not be listed again after it either \(.*a second test fault.*\): 1 entry object deleted by this drop was not checked/);
    const names = await listNames(prefix);
    expect(names).not.toContain(entryName(b));
    for (const t of [b, c]) expect(names).toContain(blobName(t));
    expect(names).toContain(entryName(c));
    await store.close();
  });

  it('keeps an entry object written again after the listing (Last-Modified changed: a writer added that key anew), and its blob', async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const transport = transportOf(store) as Transport & { getSmallObject(name: string, maxBytes: number): Promise<Uint8Array | undefined> };
    const get = transport.getSmallObject.bind(transport);
    transport.getSmallObject = async (name, maxBytes) => {
      if (name === entryName(b)) {
        // A second later (Last-Modified has a second's resolution), the same object PUT again.
        const bytes = await get(name, maxBytes);
        await sleep(1100);
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: bytes }));
      }
      return get(name, maxBytes);
    };
    const report = await dropBelowFloor(store);
    expect(report.entries.map((x) => x.key)).toEqual([c.key]);
    const names = await listNames(prefix);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    expect(names).not.toContain(entryName(c));
    await expectVerifies(url);
    await store.close();
  });

  it('keeps the blob of an entry a writer added again after the listing (its entry object is there again); the entry stays whole', async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const writer = await openCacheStore(url);
    const transport = transportOf(store);
    const del = transport.deleteObject.bind(transport);
    transport.deleteObject = async (name, beforeAttempt) => {
      // Just before the drop's look at b's blob: `b` added again whole (blob, then entry object).
      if (name === blobName(b)) expect(await writer.addEntries([toInput(b, 'b.weight')])).toEqual([{ key: b.key, added: true, slicesBound: 0 }]);
      return del(name, beforeAttempt);
    };
    // minAgeMs 0: the blob's age keeps nothing; its entry object does.
    const report = await dropBelowFloor(store);
    expect(report.entries.map((x) => x.key)).toEqual([c.key]);
    const names = await listNames(prefix);
    expect(names).toContain(blobName(b));
    expect(names).toContain(entryName(b));
    expect(names).not.toContain(blobName(c));
    await expectVerifies(url);
    const reader = await openCacheStore(url);
    expect(reader.getEntry(b.key)).toBeDefined();
    await reader.checkBlob(b.key);
    await reader.close();
    await writer.close();
    await store.close();
  });

  it('keeps a blob a writer stored again after the listing, before its entry object (younger than minAgeMs)', async () => {
    const { prefix, url, store, b, c } = await makeCache();
    // Old enough for a minAgeMs of 1.5 s (Last-Modified has a second's resolution).
    await sleep(2600);
    const transport = transportOf(store);
    const del = transport.deleteObject.bind(transport);
    transport.deleteObject = async (name, beforeAttempt) => {
      // Just before the drop's look at c's blob: a writer's PUT of it (its entry object would follow).
      if (name === blobName(c)) await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${blobName(c)}`, Body: c.payload }));
      return del(name, beforeAttempt);
    };
    const report = await dropBelowFloor(store, { minAgeMs: 1500 });
    expect(report).toMatchObject({ count: 1, reclaimedBytes: b.payload.length, blobsLeft: [] });
    expect(report.entries.map((x) => x.key)).toEqual([b.key]);
    const names = await listNames(prefix);
    expect(names).toContain(blobName(c));
    expect(names).not.toContain(entryName(c));
    expect(names).not.toContain(blobName(b));
    await expectVerifies(url);
    await store.close();
  });
});
