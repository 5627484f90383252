// dropUnboundEntries on an s3:// cache paused past DROP_INTENT_STALE_MS (review R1: a laptop asleep,
// a debugger, a clock hours behind) and the blob re-checks of a drop and of gc (window (c)): forced
// with transport hooks.
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { SHARD, blobName, entryName, runPastStale, transportOf, useDropBucket } from './s3-drop-fixtures.js';
import { describeS3, dropBelowFloorForTests, gcBelowFloorForTests } from './s3-helpers.js';

const HOUR_MS = 60 * 60 * 1000;

describeS3('S3 store: a paused drop, and the last look before a blob DELETE', () => {
  const fx = useDropBucket('droppaused');

  it('a drop paused past the stale age, its intent resolved meanwhile, deletes no entry: the binding made meanwhile keeps its blob', async () => {
    const b = makeTensor([40000, 1], 702);
    const { url, store } = await fx.storeHolding({ 'b.weight': b });
    const [resolver, writer, collector] = await Promise.all([openCacheStore(url), openCacheStore(url), openCacheStore(url)]);
    // The resolver's clock 6 h on: the drop "slept" that long after its intent PUT.
    runPastStale(resolver);
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
    const report = await dropBelowFloorForTests(store);
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
    const b = makeTensor([300, 1], 703);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    const t = transportOf(store);
    const head = t.headObject.bind(t);
    // The intent's Last-Modified as the server will show it after a pause of 4 h.
    t.headObject = async (name) => {
      const found = await head(name);
      return found !== undefined && name.startsWith('dropping/') ? { ...found, lastModifiedMs: found.lastModifiedMs - 4 * HOUR_MS } : found;
    };
    const report = await dropBelowFloorForTests(store);
    expect(report.count).toBe(0);
    expect(report.stopped).toEqual({ reason: 'intent-old', leftToResolver: [] });
    const names = await fx.listNames(prefix);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    await store.close();
  });

  it('a drop that stops after deleting an entry names it in stopped.leftToResolver (its intent and blob stay for the resolver)', async () => {
    const a = makeTensor([300, 1], 706);
    const b = makeTensor([300, 1], 707);
    const { prefix, store } = await fx.storeHolding({ 'a.weight': a, 'b.weight': b });
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
    const report = await dropBelowFloorForTests(store);
    expect(report.count).toBe(0);
    expect(report.stopped).toEqual({ reason: 'intent-old', leftToResolver: [entryName(a)] });
    const names = await fx.listNames(prefix);
    expect(names).not.toContain(entryName(a));
    expect(names).toContain(blobName(a));
    expect(names.filter((name) => name.startsWith('dropping/') && name.includes(a.key))).toHaveLength(1);
    expect(names).toContain(entryName(b));
    await store.close();
  });

  it('a put back whose blob is gone (a resolver beside a paused drop deleted it) puts no entry back: blobsMissing', async () => {
    const b = makeTensor([300, 1], 704);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    const t = transportOf(store);
    const del = t.deleteObject.bind(t);
    t.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) {
        // After the entry DELETE: a writer's alias of b (written before it looked at the entry: the
        // drop must put the entry back), and the blob goes (as a resolver's or gc's would, the drop paused).
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 600], 0, b.key)}`);
        await fx.deleteRaw(`${prefix}${blobName(b)}`);
      }
      return done;
    };
    const report = await dropBelowFloorForTests(store);
    expect(report.blobsMissing).toEqual([blobName(b)]);
    // No entry without its blob (BLOB_MISSING for every reader): the slice resolves to nothing, read raw.
    expect(await fx.listNames(prefix, 'entries/')).toEqual([]);
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
    const blobBytes = await fx.getRaw(`${prefix}${blobName(b)}`);
    let stored = false;
    t.list = async (dir) => {
      if (dir.startsWith('dropping/') && dir.includes(b.key) && !stored) {
        stored = true;
        await fx.putRaw(`${prefix}${blobName(b)}`, blobBytes);
        aheadMs = 0;
      }
      return list(dir);
    };
    await act();
    expect(stored).toBe(true);
    await fx.putRaw(`${prefix}${entryName(b)}`, entryBytes);
  }

  it("gc looks at an orphan blob's age last, after the entry and intents: a writer's blob PUT during those looks keeps it", async () => {
    const b = makeTensor([40000, 1], 705);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    const entryBytes = await fx.getRaw(`${prefix}${entryName(b)}`);
    await fx.deleteRaw(`${prefix}${entryName(b)}`);
    const collector = await openCacheStore(url);
    await storeAgainDuringIntentLook(collector, prefix, b, entryBytes, () => gcBelowFloorForTests(collector, { minAgeMs: 10 * 60 * 1000 }));
    const reader = await openCacheStore(url);
    await reader.checkBlob(b.key);
    await Promise.all([reader, collector, store].map((s) => s.close()));
  });

  it("a drop looks at a dropped entry's blob age last: a writer storing the key again during its looks keeps the blob", async () => {
    const b = makeTensor([40000, 1], 706);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    const entryBytes = await fx.getRaw(`${prefix}${entryName(b)}`);
    const dropper = await openCacheStore(url);
    await storeAgainDuringIntentLook(dropper, prefix, b, entryBytes, () =>
      (dropper as S3CacheStore).dropUnboundEntries({ minAgeMs: 10 * 60 * 1000, allowMinAgeBelowFloorForTests: true }),
    );
    const reader = await openCacheStore(url);
    await reader.checkBlob(b.key);
    await Promise.all([reader, dropper, store].map((s) => s.close()));
  });
});
