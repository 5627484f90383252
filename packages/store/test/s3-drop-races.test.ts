// dropUnboundEntries on an s3:// cache beside gc, another drop and writers (README "S3 layout",
// Removing entries): each race the intent objects close, forced with transport hooks: (R1) a gc
// beside the drop keeps the blob of an entry the drop puts back; (R2) of two drops beside a writer,
// the one that judged the entry unbound leaves its blob while the other puts it back; (R3) a
// binding hidden from the drop's second listing by another writer's short-lived alias above it
// still counts; (R4) a drop killed before it put back a bound entry leaves an intent that gc or the
// next drop resolves once stale. And: gc keeps a blob under an intent, verify names a dangling
// binding. (A case running two drops and a writer at once, unforced, passed on the code before the
// intents too: R2 forces that interleaving.)
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { DROP_INTENT_STALE_MS } from '../src/s3-drop-intents.js';
import { sliceObjectName } from '../src/s3-layout.js';
import { barrier, deferred } from './s3-alias-hooks.js';
import { makeTensor, toInput, type TestTensor } from './helpers.js';
import { SHARD, blobName, entryName, runAhead, transportOf, useDropBucket } from './s3-drop-fixtures.js';
import { describeS3, dropBelowFloorForTests as drop, gcBelowFloorForTests } from './s3-helpers.js';

describeS3('S3 store: dropUnboundEntries beside gc, drops and writers', () => {
  const fx = useDropBucket('dropraces', 'r');

  /** `a` bound at slice 0; `b` and `c` unbound (both old enough for minAgeMs 0). */
  async function makeCache() {
    const { prefix, url } = fx.nextCache();
    const [a, b, c] = [701, 702, 703].map((seed) => makeTensor([40, 1], seed)) as [TestTensor, TestTensor, TestTensor];
    const store = await openCacheStore(url, { create: true });
    await store.addEntries([toInput(a, 'a.weight', [[SHARD, 0, 80]]), toInput(b, 'b.weight'), toInput(c, 'c.weight')]);
    return { prefix, url, store, a, b, c };
  }

  /** A fresh handle: the slice resolves to `t`, its entry is there, its blob whole; verify is clean. */
  async function expectBoundWhole(url: string, t: TestTensor, offsetBytes: number): Promise<void> {
    const reader = await openCacheStore(url);
    expect(reader.lookupBySlice(SHARD, offsetBytes, 80)?.key).toBe(t.key);
    await reader.checkBlob(t.key);
    expect((await reader.verify()).problems).toEqual([]);
    await reader.close();
  }

  it('R1: a gc beside the drop keeps the blob of an entry the drop then puts back for a writer (it lists dropping/ after entries/)', async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const collector = await openCacheStore(url);
    const transport = transportOf(store);
    const list = transport.list.bind(transport);
    let deleted = false;
    const del = transport.deleteObject.bind(transport);
    transport.deleteObject = async (name, beforeAttempt) => {
      const done = await del(name, beforeAttempt);
      if (name === entryName(b)) deleted = true;
      return done;
    };
    let gcReport: Awaited<ReturnType<typeof gcBelowFloorForTests>> | undefined;
    transport.list = async (dir) => {
      // The drop's second listing: a writer has bound b since its DELETE, and a gc ran meanwhile.
      if (dir === 'slices/' && deleted && gcReport === undefined) {
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`);
        gcReport = await gcBelowFloorForTests(collector);
      }
      return list(dir);
    };
    const report = await drop(store);
    expect(report.entries.map((x) => x.key)).toEqual([c.key]);
    expect(gcReport!.orphanBlobs).not.toContain(blobName(b));
    // b's and c's: the drop's intents for both are there.
    expect(gcReport!.keptUnderDrop).toBe(2);
    expect(await fx.listNames(prefix, 'dropping/')).toEqual([]);
    await expectBoundWhole(url, b, 400);
    await collector.close();
    await store.close();
  });

  it('R2: two drops beside a writer: the one that judged the entry unbound leaves its blob while the other puts the entry back', async () => {
    const { prefix, url, store, b } = await makeCache();
    const other = await openCacheStore(url);
    const [one, two] = [transportOf(store), transportOf(other)];
    // Both look at b's entry object before either DELETE: both delete it, both count it theirs.
    const bothHeaded = barrier(2);
    for (const transport of [one, two]) {
      const head = transport.headObject.bind(transport);
      let first = true;
      transport.headObject = async (name) => {
        const result = await head(name);
        if (name === entryName(b) && first) {
          first = false;
          await bothHeaded();
        }
        return result;
      };
    }
    // The second drop judged b unbound (its listing came before the writer's alias); its blob
    // DELETE goes out only once the first has put the entry back.
    const twoChecked = deferred();
    const oneRestored = deferred();
    const oneDone = deferred();
    const delTwo = two.deleteObject.bind(two);
    two.deleteObject = async (name, beforeAttempt) => {
      if (name !== blobName(b) || beforeAttempt === undefined) return delTwo(name, beforeAttempt);
      return delTwo(name, async () => {
        const go = await beforeAttempt();
        twoChecked.resolve();
        if (go) await Promise.race([oneRestored.promise, oneDone.promise]);
        return go;
      });
    };
    const [listOne, putOne, delOne] = [one.list.bind(one), one.putObject.bind(one), one.deleteObject.bind(one)];
    let deletedByOne = false;
    one.deleteObject = async (name, beforeAttempt) => {
      const done = await delOne(name, beforeAttempt);
      if (name === entryName(b)) deletedByOne = true;
      return done;
    };
    let listed = false;
    one.list = async (dir) => {
      // Its second listing (after its DELETE; the first one of slices/ is its refresh's).
      if (dir === 'slices/' && deletedByOne && !listed) {
        listed = true;
        await twoChecked.promise;
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`);
      }
      return listOne(dir);
    };
    one.putObject = async (name, body, contentType) => {
      await putOne(name, body, contentType);
      if (name === entryName(b)) oneRestored.resolve();
    };
    const [reportTwo, reportOne] = await Promise.all([drop(other), drop(store).finally(oneDone.resolve)]);
    expect(reportOne.entries.map((x) => x.key)).not.toContain(b.key);
    expect(reportTwo.entries.map((x) => x.key)).not.toContain(b.key);
    expect(await fx.listNames(prefix, 'dropping/')).toEqual([]);
    await expectBoundWhole(url, b, 400);
    await other.close();
    await store.close();
  });

  it("R3: a writer's binding hidden from the drop's second listing by another writer's short-lived alias above it still counts: the entry is put back", async () => {
    const { prefix, url, store, b, c } = await makeCache();
    const transport = transportOf(store);
    const [get, list] = [transport.getSmallObject.bind(transport), transport.list.bind(transport)];
    let read = false;
    transport.getSmallObject = async (name, maxBytes) => {
      // After the drop's listing, before its DELETE: a writer binds b (it finds the entry: reported bound).
      if (name === entryName(b)) await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`);
      read = true;
      return get(name, maxBytes);
    };
    const hider = sliceObjectName([SHARD, 400, 80], 1, c.key);
    let listed = false;
    transport.list = async (dir) => {
      if (dir !== 'slices/' || !read || listed) return list(dir);
      // Another writer's alias at epoch 1 for the drop's second listing only (it lost, and deletes it).
      listed = true;
      await fx.putRaw(`${prefix}${hider}`);
      const out = await list(dir);
      await fx.deleteRaw(`${prefix}${hider}`);
      return out;
    };
    const report = await drop(store);
    expect(report.entries.map((x) => x.key)).not.toContain(b.key);
    expect(await fx.listNames(prefix)).toContain(entryName(b));
    await expectBoundWhole(url, b, 400);
    await store.close();
  });

  /** A drop killed after its DELETEs (its second listing never answers), with b bound meanwhile by a writer. */
  async function killedDrop() {
    const made = await makeCache();
    const { prefix, store, b } = made;
    const transport = transportOf(store);
    const list = transport.list.bind(transport);
    let deletes = 0;
    const del = transport.deleteObject.bind(transport);
    transport.deleteObject = async (name, beforeAttempt) => ((deletes += 1), del(name, beforeAttempt));
    transport.list = async (dir) => {
      if (dir === 'slices/' && deletes > 0) {
        await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`);
        throw new Error('the drop was killed here (a test)');
      }
      return list(dir);
    };
    await expect(drop(store)).rejects.toThrow('killed');
    expect(await fx.listNames(prefix)).not.toContain(entryName(b));
    await store.close();
    return made;
  }

  it('R4: a drop killed before its second listing leaves its intents; gc keeps their blobs until they are stale, then puts the bound entry back and removes the unbound one\'s blob', async () => {
    const { prefix, url, b, c } = await killedDrop();
    const intents = await fx.listNames(prefix, 'dropping/');
    expect(intents).toHaveLength(2);
    const collector = await openCacheStore(url);
    const young = await gcBelowFloorForTests(collector);
    expect(young).toMatchObject({ orphanBlobs: [], keptUnderDrop: 2, staleDropIntents: [] });
    runAhead(collector, DROP_INTENT_STALE_MS + 60_000);
    const dry = await gcBelowFloorForTests(collector, { dryRun: true });
    expect(dry.staleDropIntents).toEqual(intents);
    const stale = await gcBelowFloorForTests(collector);
    expect(stale.staleDropIntents).toEqual(intents);
    const names = await fx.listNames(prefix);
    expect(names.filter((name) => name.startsWith('dropping/'))).toEqual([]);
    expect(names).not.toContain(blobName(c));
    await expectBoundWhole(url, b, 400);
    await collector.close();
  });

  it("R4: the next drop resolves a killed drop's stale intents first: the bound entry comes back, whole", async () => {
    const { prefix, url, b, c } = await killedDrop();
    const next = await openCacheStore(url);
    runAhead(next, DROP_INTENT_STALE_MS + 60_000);
    const report = await drop(next);
    expect(report.entries.map((x) => x.key)).toEqual([]);
    const names = await fx.listNames(prefix);
    expect(names.filter((name) => name.startsWith('dropping/'))).toEqual([]);
    expect(names).not.toContain(blobName(c));
    await expectBoundWhole(url, b, 400);
    await next.close();
  });

  it("gc keeps the blob of an entry under another drop's intent (not stale), and counts it in keptUnderDrop", async () => {
    const { prefix, url, store, b } = await makeCache();
    expect(await fx.listNames(prefix, entryName(b))).toEqual([entryName(b)]);
    const intent = await fx.leaveIntent(prefix, b, new TextEncoder().encode('{}'));
    const report = await gcBelowFloorForTests(store);
    expect(report.orphanBlobs).toEqual([]);
    expect(report.keptUnderDrop).toBe(1);
    expect(report.unknownFiles).toEqual([]);
    expect(await fx.listNames(prefix)).toEqual(expect.arrayContaining([blobName(b), intent]));
    // Once the intent is gone, the blob is an orphan.
    await fx.deleteRaw(`${prefix}${intent}`);
    expect((await gcBelowFloorForTests(store)).orphanBlobs).toEqual([blobName(b)]);
    void url;
    await store.close();
  });

  it("verify names a slice bound at its top epoch to a key with no entry object (ENTRY_NOT_FOUND, reason 'dangling-binding'); not while a drop's intent names the key", async () => {
    const { prefix, url, store, b } = await makeCache();
    await fx.putRaw(`${prefix}${sliceObjectName([SHARD, 400, 80], 0, b.key)}`);
    const intent = await fx.leaveIntent(prefix, b, new TextEncoder().encode('{}'));
    const reader = await openCacheStore(url);
    expect((await reader.verify()).problems).toEqual([]);
    await fx.deleteRaw(`${prefix}${intent}`);
    const report = await reader.verify();
    expect(report.ok).toBe(false);
    expect(report.problems).toEqual([{ key: b.key, qualname: '', code: 'ENTRY_NOT_FOUND', reason: 'dangling-binding', message: expect.stringContaining('dangling binding: 1 slice is bound') }]);
    await reader.close();
    await store.close();
  });
});
