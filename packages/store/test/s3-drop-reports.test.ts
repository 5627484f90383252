// What an s3:// gc and drop report of killed drops' intents they resolved (put back, blob deleted,
// a failure) and of the bytes a drop reclaimed (README "S3 layout", Removing entries). Intents are
// made by hand: a killed drop's, its entry object deleted.
import { expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { StoreError } from '../src/errors.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { SHARD, blobName, entryName, runPastStale, transportOf, useDropBucket } from './s3-drop-fixtures.js';
import { describeS3, dropBelowFloorForTests, gcBelowFloorForTests } from './s3-helpers.js';

/** JSON that is neither an intent body nor an entry object's. */
const DAMAGED_JSON = new TextEncoder().encode('{"damaged": true}');

describeS3('S3 store: reports of resolved drop intents and reclaimed bytes', () => {
  const fx = useDropBucket('dropreports');

  /**
   * A cache holding `b` (tensor `seed`; bound or not) and `c` (`seed` + 100) unbound, each under a
   * killed drop's intent, their entry objects gone.
   */
  async function killedDropOf(bBound: boolean, seed: number) {
    const b = makeTensor([40000, 1], seed);
    const c = makeTensor([40000, 1], seed + 100);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b, 'c.weight': c });
    if (bBound) await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`);
    for (const t of [b, c]) await fx.leaveIntent(prefix, t);
    await store.close();
    return { prefix, url, b, c };
  }

  /**
   * A drop on `store` whose put back of `b`'s entry is refused (its conditional PUT answered
   * 'exists', a 409 of another conditional write racing, the entry still absent) the first
   * `refusals` times: a writer's alias of b lands after the drop's entry DELETE, so it puts b back.
   * Returns how many put backs of b were tried.
   */
  async function dropWithPutBackRefused(store: CacheStore, prefix: string, b: TestTensor, refusals: number) {
    const transport = transportOf(store);
    const [del, putIfAbsent] = [transport.deleteObject.bind(transport), transport.putObjectIfAbsent.bind(transport)];
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      // After the entry DELETE a writer's alias of b: the drop puts the entry back.
      if (name === entryName(b)) await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`);
      return done;
    };
    let tried = 0;
    transport.putObjectIfAbsent = async (name, body, contentType) => {
      // The transport answers 'exists' for a 409 too; the racing write then failed: nothing there.
      if (name === entryName(b) && tried++ < refusals) return 'exists';
      return putIfAbsent(name, body, contentType);
    };
    const report = await dropBelowFloorForTests(store);
    return { report, tried };
  }

  /**
   * gc, its clock past the stale age, of a cache holding `b` (tensor `seed`; bound at SHARD 0+80000
   * when `bound`) under an intent whose body is `body(the entry object's bytes)`, the entry object
   * deleted unless `keepEntry`: the report, the intent's name and the object names left after it.
   */
  async function gcOfDamagedIntent(seed: number, options: { bound?: boolean; keepEntry?: boolean; body: (entryBytes: Uint8Array) => Promise<Uint8Array> | Uint8Array }) {
    const b = makeTensor([40000, 1], seed);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    if (options.bound === true) await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`);
    const body = await options.body(await fx.getRaw(`${prefix}${entryName(b)}`));
    const intent = options.keepEntry === true ? await fx.putIntent(prefix, b, body) : await fx.leaveIntent(prefix, b, body);
    runPastStale(store);
    const report = await gcBelowFloorForTests(store);
    const names = await fx.listNames(prefix);
    await store.close();
    return { b, report, intent, names };
  }

  /**
   * A killed drop's stale intents (b bound, c not) resolved by `resolve` on a new handle whose clock
   * makes them stale: its report names both intents, b put back and c's blob deleted.
   */
  async function expectKilledDropResolvedBy(seed: number, resolve: (store: CacheStore) => Promise<{ staleDropIntents?: string[]; staleDropResolution?: unknown }>) {
    const { url, b, c } = await killedDropOf(true, seed);
    const resolver = await openCacheStore(url);
    runPastStale(resolver);
    const report = await resolve(resolver);
    expect(report.staleDropIntents).toHaveLength(2);
    expect(report.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [blobName(c)], blobsMissing: [] });
    await resolver.close();
  }

  it("gc reports what resolving a killed drop's intents did: the bound entry put back, the unbound one's blob deleted", async () => {
    await expectKilledDropResolvedBy(802, gcBelowFloorForTests);
  });

  it("a drop reports the killed drop's intents it resolved first, and what that did", async () => {
    await expectKilledDropResolvedBy(803, dropBelowFloorForTests);
  });

  it("gc's report survives a failure resolving an intent: the failure is a field, the deletions before it reported", async () => {
    const { prefix, url, b } = await killedDropOf(true, 804);
    // An orphan blob for gc to delete before it resolves the intents.
    const d = makeTensor([40000, 1], 999);
    const writer = await openCacheStore(url);
    await writer.addEntries([toInput(d, 'd.weight')]);
    await writer.close();
    await fx.deleteRaw(`${prefix}${entryName(d)}`);
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
    const b = makeTensor([40000, 1], 1001);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    await fx.deleteRaw(`${prefix}${blobName(b)}`);
    const report = await dropBelowFloorForTests(store);
    expect(report.count).toBe(1);
    expect(report.reclaimedBytes).toBe(0);
    await store.close();
  });

  it("gc keeps the stamp objects of a binding whose entry object is under a drop's intent (the drop may put it back)", async () => {
    const b = makeTensor([40000, 1], 1101);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    const stamp = await fx.bindWithStamp(prefix, b);
    // A live drop between its entry DELETE and its put back: its intent, the entry object gone.
    await fx.leaveIntent(prefix, b);
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanStamps).toEqual([]);
    expect(await fx.listNames(prefix, stamp)).toEqual([stamp]);
    await store.close();
  });

  it("verify lists entries/ before dropping/: a drop's entry DELETE between the listings is no dangling binding", async () => {
    const b = makeTensor([40000, 1], 1201);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`);
    const verifier = await openCacheStore(url);
    const transport = transportOf(verifier);
    const list = transport.list.bind(transport);
    let droppingListed: Promise<unknown> | undefined;
    let dropped = false;
    // A drop's intent PUT and entry DELETE, right before verify's listing of entries/, after its
    // listing of dropping/ when that was started first (old code: the three in parallel).
    const dropNow = async () => {
      if (dropped) return;
      dropped = true;
      await fx.leaveIntent(prefix, b);
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
    const { b, report, intent, names } = await gcOfDamagedIntent(1301, { bound: true, body: () => DAMAGED_JSON });
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent], entriesLost: [entryName(b)] });
    expect(names).not.toContain(entryName(b));
    expect(names).not.toContain(intent);
  });

  it("a stale intent holding an entry object's bytes bare (not splitzip-drop-intent/1: no release wrote those) is damaged: intentsInvalid and entriesLost, never put back, the intent deleted", async () => {
    const { b, report, intent, names } = await gcOfDamagedIntent(1351, { bound: true, body: (entryBytes) => entryBytes });
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent], entriesLost: [entryName(b)] });
    expect(names).not.toContain(entryName(b));
    expect(names).not.toContain(intent);
  });

  it('a drop PUTs no intent of bytes that fail the entry checks (read back damaged) and leaves that entry', async () => {
    const b = makeTensor([40000, 1], 1401);
    const { prefix, store } = await fx.storeHolding({ 'b.weight': b });
    const transport = transportOf(store);
    const get = transport.getSmallObject.bind(transport);
    transport.getSmallObject = async (name, maxBytes) => (name === entryName(b) ? DAMAGED_JSON : get(name, maxBytes));
    const report = await dropBelowFloorForTests(store);
    expect(report.count).toBe(0);
    const names = await fx.listNames(prefix);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
    await store.close();
  });

  it("a killed drop's intent is judged from the drop's judging listing: an alias written between that listing and the intent PUT (hidden below another's) counts as bound", async () => {
    const b = makeTensor([40000, 1], 1501);
    const c = makeTensor([40000, 1], 1502);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    const transport = transportOf(store);
    const [put, list] = [transport.putObject.bind(transport), transport.list.bind(transport)];
    let aliased = false;
    transport.putObject = async (name, body, contentType) => {
      if (name.startsWith('dropping/') && !aliased) {
        aliased = true;
        // A writer binds b after the judging listing, before the intent PUT (its alias a whole
        // second older than the intent, as Last-Modified goes; it saw the entry: reported made).
        // Another writer's rebind one epoch above hides it from "at the top epoch" (R3).
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 0, b.key)}`);
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 0, 80000], 1, c.key)}`);
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
    await expect(dropBelowFloorForTests(store)).rejects.toThrow('killed');
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
    const b = makeTensor([40000, 1], 1601);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    const { report, tried } = await dropWithPutBackRefused(store, prefix, b, 1);
    expect(tried).toBe(2);
    expect(report.count).toBe(0);
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 0, 80000)?.key).toBe(b.key);
    await reader.checkBlob(b.key);
    await Promise.all([reader, store].map((s) => s.close()));
  });
  it("a put back refused every time (409s) with the entry still absent is a restoreConflict: the intent stays and a later resolver puts the entry back", async () => {
    const b = makeTensor([40000, 1], 1701);
    const { prefix, url, store } = await fx.storeHolding({ 'b.weight': b });
    const { report, tried } = await dropWithPutBackRefused(store, prefix, b, Infinity);
    expect(tried).toBe(4);
    expect(report.count).toBe(0);
    expect(report.restoreConflicts).toEqual([entryName(b)]);
    let names = await fx.listNames(prefix);
    expect(names).not.toContain(entryName(b));
    expect(names.filter((n) => n.startsWith('dropping/'))).toHaveLength(1);
    await store.close();
    // A resolver refused the same way keeps the intent and reports it too.
    const refusing = await openCacheStore(url);
    runPastStale(refusing);
    transportOf(refusing).putObjectIfAbsent = async () => 'exists';
    const refusedReport = await gcBelowFloorForTests(refusing);
    expect(refusedReport.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], restoreConflicts: [entryName(b)] });
    await refusing.close();
    const collector = await openCacheStore(url);
    runPastStale(collector);
    const gcReport = await gcBelowFloorForTests(collector);
    expect(gcReport.staleDropResolution).toEqual({ restored: [entryName(b)], blobsDeleted: [], blobsMissing: [] });
    names = await fx.listNames(prefix);
    expect(names.filter((n) => n.startsWith('dropping/'))).toEqual([]);
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, 0, 80000)?.key).toBe(b.key);
    await reader.checkBlob(b.key);
    await Promise.all([reader, collector].map((s) => s.close()));
  });
  it("a damaged stale intent of an unbound key is resolved by its name: the blob rule (blob deleted), the intent deleted", async () => {
    const { b, report, intent, names } = await gcOfDamagedIntent(1801, { body: () => DAMAGED_JSON });
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [blobName(b)], blobsMissing: [], intentsInvalid: [intent] });
    expect(names).not.toContain(intent);
    expect(names).not.toContain(blobName(b));
  });

  it("a damaged stale intent whose entry object is present is deleted, the entry and blob kept", async () => {
    const { b, report, intent, names } = await gcOfDamagedIntent(1901, { keepEntry: true, body: () => DAMAGED_JSON });
    expect(report.staleDropResolution).toEqual({ restored: [], blobsDeleted: [], blobsMissing: [], intentsInvalid: [intent] });
    expect(names).not.toContain(intent);
    expect(names).toContain(entryName(b));
    expect(names).toContain(blobName(b));
  });
});
