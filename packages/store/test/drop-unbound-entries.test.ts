// dropUnboundEntries on a directory cache: exactly the entries no slice is bound to go, with their
// blobs; bound ones stay; a dry run changes nothing; a second run removes none; an entry another
// writer binds before the drop's lock is kept; a handle holding the older generation finds the blob
// gone (BLOB_MISSING, a reader's raw fallback) or reads it through a kept descriptor; a repairBlob
// the drop overtakes between its look and its lock finds the entry gone (ENTRY_NOT_FOUND, no orphan
// blob); a damaged journal makes the real run refuse as the dry run does; a damaged manifest's kept
// copy (its recovery kept the entries without their bindings) makes both refuse; s3:// checks its
// options first (the S3 drop: s3-drop-unbound-entries.test.ts).
import { existsSync } from 'node:fs';
import { readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HeldLock } from '../src/write-lock.js';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { S3CacheStore } from '../src/s3-cache-store.js';
import { openCacheStore, recoverDamagedManifest, type CacheStore } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00001.safetensors';
const SETTINGS = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false };

/**
 * Five entries: t0 bound twice, t1 once, t2 and t3 never bound, t4 bound and then unbound (so the
 * manifest is a later generation and the journal holds a record too).
 */
async function makeMixedCache(): Promise<{ root: string; tensors: TestTensor[]; bound: TestTensor[]; unbound: TestTensor[] }> {
  const root = await makeTempDir();
  const tensors = Array.from({ length: 5 }, (_, i) => makeTensor([40, 6], 500 + i));
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  await store.addEntries([
    toInput(tensors[0]!, 't0', [[SHARD, 0, 480], ['other.safetensors', 0, 480]]),
    toInput(tensors[1]!, 't1', [[SHARD, 480, 480]]),
    toInput(tensors[4]!, 't4', [[SHARD, 960, 480]]),
  ]);
  expect(await store.unbindSlices([{ shardName: SHARD, offsetBytes: 960, sizeBytes: 480 }])).toBe(1);
  await store.addEntries([toInput(tensors[2]!, 't2'), toInput(tensors[3]!, 't3')]);
  await store.close();
  return { root, tensors, bound: [tensors[0]!, tensors[1]!], unbound: [tensors[2]!, tensors[3]!, tensors[4]!] };
}

const blobPath = (root: string, t: TestTensor): string => join(root, 'blobs', `${t.key}.bin`);

async function snapshot(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const dir of ['', 'blobs']) {
    for (const name of await readdir(join(root, dir))) {
      const path = join(root, dir, name);
      if ((await stat(path)).isFile()) out[join(dir, name)] = (await readFile(path)).toString('base64');
    }
  }
  return out;
}

describe('dropUnboundEntries', () => {
  it('removes exactly the unbound entries and their blobs, keeps the bound ones and their bindings; a second run removes none', async () => {
    const { root, tensors, bound, unbound } = await makeMixedCache();
    const store = await openCacheStore(root, { compactOnClose: false });
    const generation = store.generation;
    const report = await store.dropUnboundEntries();
    expect(report.dryRun).toBe(false);
    expect(report.count).toBe(3);
    expect(report.blobsLeft).toEqual([]);
    expect(report.entries.map((e) => e.key).sort()).toEqual(unbound.map((t) => t.key).sort());
    expect(report.entries.map((e) => e.qualname).sort()).toEqual(['t2', 't3', 't4']);
    const sizes = unbound.map((t) => t.payload.length);
    expect(report.reclaimedBytes).toBe(sizes.reduce((a, b) => a + b, 0));
    expect(report.entries.map((e) => e.compBytes).reduce((a, b) => a + b, 0)).toBe(report.reclaimedBytes);
    // One new generation, swapped into this handle.
    expect(store.generation).toBe(generation + 1);
    expect(store.size).toBe(2);
    for (const t of unbound) {
      expect(store.getEntry(t.key), t.key).toBeUndefined();
      expect(existsSync(blobPath(root, t)), t.key).toBe(false);
    }
    for (const t of bound) expect(existsSync(blobPath(root, t))).toBe(true);
    expect(store.lookupBySlice(SHARD, 0, 480)?.key).toBe(tensors[0]!.key);
    expect(store.lookupBySlice('other.safetensors', 0, 480)?.key).toBe(tensors[0]!.key);
    expect(store.lookupBySlice(SHARD, 480, 480)?.key).toBe(tensors[1]!.key);
    // A second run: nothing unbound, no lock, no new generation.
    expect(await store.dropUnboundEntries()).toEqual({ dryRun: false, count: 0, entries: [], reclaimedBytes: 0, blobsLeft: [] });
    expect(store.generation).toBe(generation + 1);
    await store.close();
    // Another handle sees the same: the bound entries, verified, and no orphan for gc.
    const reopened = await openCacheStore(root, { compactOnClose: false });
    expect([...reopened.entries()].map((e) => e.qualname).sort()).toEqual(['t0', 't1']);
    expect((await reopened.verify({ decode: true })).problems).toEqual([]);
    const gc = await reopened.gc();
    expect(gc.orphanBlobs).toEqual([]);
    await reopened.close();
  });

  it('a dry run reports the same entries and changes nothing on disk or in the handle', async () => {
    const { root, unbound } = await makeMixedCache();
    const before = await snapshot(root);
    const store = await openCacheStore(root, { compactOnClose: false });
    const generation = store.generation;
    const dry = await store.dropUnboundEntries({ dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, count: 3, blobsLeft: [] });
    expect(dry.entries.map((e) => e.key).sort()).toEqual(unbound.map((t) => t.key).sort());
    expect(store.generation).toBe(generation);
    expect(store.size).toBe(5);
    expect(await snapshot(root)).toEqual(before);
    const real = await store.dropUnboundEntries();
    expect({ ...real, dryRun: true }).toEqual(dry);
    await store.close();
  });

  it('an entry another writer binds before the drop takes the lock is judged under the lock, and kept', async () => {
    const { root, tensors } = await makeMixedCache();
    const other = await openCacheStore(root, { compactOnClose: false });
    let bindFirst = true;
    class BindBeforeLock extends FsBackend {
      override async acquireWriteLock(timeoutMs: number, signal?: AbortSignal): Promise<HeldLock> {
        // Between the drop's look (t2 unbound) and its lock, another process binds t2.
        if (bindFirst) {
          bindFirst = false;
          expect(await other.aliasSlice(tensors[2]!.key, SHARD, 1440, 480)).toBe(true);
        }
        return super.acquireWriteLock(timeoutMs, signal);
      }
    }
    const store = await FsCacheStore.load(new BindBeforeLock(root), SETTINGS);
    const report = await store.dropUnboundEntries();
    expect(bindFirst).toBe(false);
    expect(report.entries.map((e) => e.qualname).sort()).toEqual(['t3', 't4']);
    expect(store.lookupBySlice(SHARD, 1440, 480)?.key).toBe(tensors[2]!.key);
    expect(existsSync(blobPath(root, tensors[2]!))).toBe(true);
    await store.close();
    await other.close();
    const reopened = await openCacheStore(root);
    expect([...reopened.entries()].map((e) => e.qualname).sort()).toEqual(['t0', 't1', 't2']);
    expect((await reopened.verify({ decode: true })).ok).toBe(true);
    await reopened.close();
  });

  it('a blob that cannot be unlinked is reported in blobsLeft (the entry is gone), and gc removes it as an orphan', async () => {
    const { root, unbound } = await makeMixedCache();
    class FailingUnlink extends FsBackend {
      override async removeFile(file: Parameters<FsBackend['removeFile']>[0]): Promise<void> {
        if (file.name === `${unbound[0]!.key}.bin`) throw new Error('EACCES (a test fault)');
        return super.removeFile(file);
      }
    }
    const store = await FsCacheStore.load(new FailingUnlink(root), SETTINGS);
    const report = await store.dropUnboundEntries();
    expect(report.count).toBe(3);
    expect(report.blobsLeft).toEqual([`blobs/${unbound[0]!.key}.bin`]);
    expect(store.getEntry(unbound[0]!.key)).toBeUndefined();
    await store.close();
    const writer = await openCacheStore(root);
    expect((await writer.verify()).problems).toEqual([]);
    expect((await writer.gc()).orphanBlobs).toEqual([`blobs/${unbound[0]!.key}.bin`]);
    expect(existsSync(blobPath(root, unbound[0]!))).toBe(false);
    await writer.close();
  });

  it("keeps an empty tensor's entry (no slice can name it: a build stores it unbound, and would again after every drop)", async () => {
    const root = await makeTempDir();
    const empty = makeTensor([0, 6], 531);
    const unbound = makeTensor([40, 6], 532);
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    await store.addEntries([toInput(empty, 'empty'), toInput(unbound, 'gone')]);
    expect((await store.dropUnboundEntries({ dryRun: true })).entries.map((e) => e.qualname)).toEqual(['gone']);
    const report = await store.dropUnboundEntries();
    expect(report.entries.map((e) => e.qualname)).toEqual(['gone']);
    expect(store.getEntry(empty.key)?.qualname).toBe('empty');
    expect(existsSync(blobPath(root, empty))).toBe(true);
    expect((await store.dropUnboundEntries()).count).toBe(0);
    await store.close();
  });

  it('bad options are INVALID_ARGUMENT, before anything changes', async () => {
    const { root } = await makeMixedCache();
    const store = await openCacheStore(root);
    expect(await catchError(() => store.dropUnboundEntries({ dryrun: true } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('did you mean "dryRun"') });
    expect(await catchError(() => store.dropUnboundEntries({ dryRun: 'yes' } as never))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(await catchError(() => store.dropUnboundEntries(null as never))).toMatchObject({ code: 'INVALID_ARGUMENT' });
    // minAgeMs and exclusive are S3's, ignored here, but checked as there (a '1h' was taken as is).
    for (const minAgeMs of ['1h', -1, Number.NaN, null]) {
      expect(await catchError(() => store.dropUnboundEntries({ minAgeMs } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'minAgeMs' }, message: expect.stringContaining('non-negative number') });
    }
    expect(await catchError(() => store.dropUnboundEntries({ exclusive: 'yes' } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'exclusive' } });
    expect(store.size).toBe(5);
    expect(await store.dropUnboundEntries({ dryRun: true, minAgeMs: 0, exclusive: false })).toMatchObject({ dryRun: true });
    await store.close();
    expect(await catchError(() => store.dropUnboundEntries())).toMatchObject({ code: 'STORE_CLOSED' });
  });
});

describe('a handle still holding the older generation', () => {
  it('finds a dropped entry whose blob is gone: BLOB_MISSING (a reader falls back to raw), and after a refresh no entry', async () => {
    const { root, unbound } = await makeMixedCache();
    const reader: CacheStore = await openCacheStore(root, { compactOnClose: false });
    const dropper = await openCacheStore(root, { compactOnClose: false });
    expect((await dropper.dropUnboundEntries()).count).toBe(3);
    await dropper.close();
    const t = unbound[0]!;
    // No refresh yet: the old state still names the entry.
    expect(reader.getEntry(t.key)?.key).toBe(t.key);
    const slot = new Uint8Array(t.payload.length);
    expect(await catchError(() => reader.checkBlob(t.key))).toMatchObject({ code: 'BLOB_MISSING' });
    expect(await catchError(() => reader.readBlob(t.key, slot))).toMatchObject({ code: 'BLOB_MISSING' });
    expect(await catchError(() => reader.readBlobSync!(t.key, slot))).toMatchObject({ code: 'BLOB_MISSING' });
    await reader.refresh();
    expect(reader.getEntry(t.key)).toBeUndefined();
    await reader.close();
  });

  it('reads a blob it keeps open (a synchronous read before the drop) with its right bytes', async () => {
    const { root, unbound } = await makeMixedCache();
    const reader = await openCacheStore(root, { compactOnClose: false });
    const t = unbound[1]!;
    const slot = new Uint8Array(t.payload.length);
    expect(Buffer.from(reader.readBlobSync!(t.key, slot))).toEqual(Buffer.from(t.payload));
    const dropper = await openCacheStore(root, { compactOnClose: false });
    await dropper.dropUnboundEntries();
    await dropper.close();
    expect(existsSync(blobPath(root, t))).toBe(false);
    // The unlinked file's bytes, checked as ever: never other bytes.
    slot.fill(0);
    expect(Buffer.from(reader.readBlobSync!(t.key, slot))).toEqual(Buffer.from(t.payload));
    await reader.close();
  });
});

describe('a build beside the drop, that found the entry by content key before it', () => {
  it('sees its blob missing and cannot put it back (ENTRY_NOT_FOUND), its alias resolves false binding nothing, and an addEntry with the slice puts entry and blob back', async () => {
    const { root, unbound } = await makeMixedCache();
    const t = unbound[0]!;
    const build = await openCacheStore(root, { compactOnClose: false });
    // The build's look: cached (found by content key), not yet aliased.
    expect(build.lookup(t.bytes, t.shape, 'BF16')?.key).toBe(t.key);
    const gc = await openCacheStore(root, { compactOnClose: false });
    expect((await gc.dropUnboundEntries()).count).toBe(3);
    await gc.close();
    // The build's check of the cached blob, and its put-back: the entry is gone under it.
    expect(await catchError(() => build.checkBlob(t.key))).toMatchObject({ code: 'BLOB_MISSING' });
    expect(await catchError(() => build.repairBlob(t.key, t.payload))).toMatchObject({ code: 'ENTRY_NOT_FOUND' });
    // The alias: judged under the lock, caught up; a missing entry is bound to nothing (no error, no record).
    expect(await build.aliasSlices([{ key: t.key, shardName: SHARD, offsetBytes: 1440, sizeBytes: 480 }])).toEqual([false]);
    expect(build.lookupBySlice(SHARD, 1440, 480)).toBeUndefined();
    expect(build.getEntry(t.key)).toBeUndefined();
    // What a build must do then: store the tensor again (its bytes give the same entry and blob).
    expect(await build.addEntry(toInput(t, 't2', [[SHARD, 1440, 480]]))).toMatchObject({ added: true, slicesBound: 1 });
    await build.close();
    const reopened = await openCacheStore(root);
    expect(reopened.lookupBySlice(SHARD, 1440, 480)?.key).toBe(t.key);
    expect((await reopened.verify({ decode: true })).problems).toEqual([]);
    await reopened.close();
  });
});

describe('a repairBlob racing the drop', () => {
  it('finds the entry gone under the lock (caught up): ENTRY_NOT_FOUND, no blob published, no orphan left', async () => {
    const root = await makeTempDir();
    const t = makeTensor([40, 6], 520);
    const setup = await openCacheStore(root, { create: true, compactOnClose: false });
    await setup.addEntries([toInput(t, 'u')]); // unbound
    await setup.close();
    await rm(blobPath(root, t)); // a lost blob: what build --repair puts back
    let dropped = false;
    class DropWhileStaging extends FsBackend {
      override async stageBlob(...args: Parameters<FsBackend['stageBlob']>): ReturnType<FsBackend['stageBlob']> {
        // After the repair's look (entry there, blob missing), before its lock: the drop runs.
        if (!dropped) {
          dropped = true;
          const gc = await openCacheStore(root, { compactOnClose: false });
          expect((await gc.dropUnboundEntries()).count).toBe(1);
          await gc.close();
        }
        return super.stageBlob(...args);
      }
    }
    const store = await FsCacheStore.load(new DropWhileStaging(root), SETTINGS);
    expect(await catchError(() => store.repairBlob(t.key, t.payload))).toMatchObject({ code: 'ENTRY_NOT_FOUND', entry: t.key });
    expect(dropped).toBe(true);
    expect(store.getEntry(t.key)).toBeUndefined();
    expect(existsSync(blobPath(root, t))).toBe(false);
    expect(await readdir(join(root, 'blobs'))).toEqual([]);
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.size).toBe(0);
    expect((await reopened.gc({ dryRun: true })).orphanBlobs).toEqual([]);
    await reopened.close();
  });
});

describe('a damaged journal', () => {
  it('makes the real drop refuse as the dry run does (JOURNAL_INVALID) when nothing is unbound, changing nothing', async () => {
    const root = await makeTempDir();
    const t = makeTensor([40, 6], 521);
    const setup = await openCacheStore(root, { create: true, compactOnClose: false });
    await setup.addEntries([toInput(t, 'b', [[SHARD, 0, 480]])]);
    await setup.compact();
    const generation = setup.generation;
    await setup.close();
    await rm(join(root, `journal.${generation}`)); // its records, acknowledged commits, lost
    const before = await snapshot(root);
    const store = await openCacheStore(root, { compactOnClose: false });
    const dry = await catchError(() => store.dropUnboundEntries({ dryRun: true }));
    expect(dry).toMatchObject({ code: 'JOURNAL_INVALID', details: { missing: true } });
    const real = await catchError(() => store.dropUnboundEntries());
    expect(real).toMatchObject({ code: 'JOURNAL_INVALID', details: { missing: true } });
    expect(real.message).toBe(dry.message);
    expect(store.generation).toBe(generation);
    expect(store.size).toBe(1);
    await store.close();
    expect(await snapshot(root)).toEqual(before);
  });
});

describe("a damaged manifest's kept copy", () => {
  /** A cache of two bound entries whose manifest was damaged and recovered: entries kept, bindings gone. */
  async function makeRecoveredCache(): Promise<{ root: string; keptAs: string }> {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    await store.addEntries([toInput(makeTensor([40, 6], 530), 'a', [[SHARD, 0, 480]]), toInput(makeTensor([40, 6], 531), 'b', [[SHARD, 480, 480]])]);
    await store.compact();
    await store.close();
    const path = join(root, 'manifest.json');
    const text = await readFile(path, 'utf8');
    const damaged = text.replace(`["${SHARD}",480,480`, `["${SHARD}",481,480`);
    expect(damaged).not.toBe(text);
    await writeFile(path, damaged);
    const recovery = await recoverDamagedManifest(root);
    expect(recovery?.salvagedEntries).toBe(2);
    return { root, keptAs: recovery!.keptAs };
  }

  it('makes the drop and its dry run refuse (MANIFEST_INVALID, saying why and how to go on), removing nothing; once the copy is moved away the drop runs', async () => {
    const { root, keptAs } = await makeRecoveredCache();
    const before = await snapshot(root);
    const store = await openCacheStore(root, { compactOnClose: false });
    // Every salvaged entry looks unbound: the drop would remove the whole cache.
    expect([...store.entries()].every((e) => e.sliceKeys.length === 0)).toBe(true);
    for (const dryRun of [true, false]) {
      const error = await catchError(() => store.dropUnboundEntries({ dryRun }));
      expect(error).toMatchObject({ code: 'MANIFEST_INVALID', path: keptAs, details: { reason: 'damaged-copy-kept' } });
      expect(error.message).toMatch(/without their slice bindings/);
      expect(error.message).toMatch(/splitzip build <model> --out <cache> --repair/);
      expect(error.message).toMatch(/move or remove the kept manifest\.json\.damaged-\* copy/);
    }
    expect(store.size).toBe(2);
    await store.close();
    expect(await snapshot(root)).toEqual(before);
    await rename(keptAs, join(await makeTempDir(), 'kept-manifest.json'));
    const again = await openCacheStore(root, { compactOnClose: false });
    expect((await again.dropUnboundEntries()).count).toBe(2);
    await again.close();
  });

  it('refuses under the lock where a recovery kept a copy between the look and the lock', async () => {
    const { root, keptAs } = await makeRecoveredCache();
    const aside = join(await makeTempDir(), 'kept-manifest.json');
    await rename(keptAs, aside);
    let putBack = true;
    class KeepBeforeLock extends FsBackend {
      override async acquireWriteLock(timeoutMs: number, signal?: AbortSignal): Promise<HeldLock> {
        if (putBack) {
          putBack = false;
          await rename(aside, keptAs);
        }
        return super.acquireWriteLock(timeoutMs, signal);
      }
    }
    const store = await FsCacheStore.load(new KeepBeforeLock(root), SETTINGS);
    const error = await catchError(() => store.dropUnboundEntries());
    expect(putBack).toBe(false);
    expect(error).toMatchObject({ code: 'MANIFEST_INVALID', details: { reason: 'damaged-copy-kept' } });
    expect(store.size).toBe(2);
    await store.close();
  });
});

describe('s3:// caches', () => {
  it('check the options before any request (unknown names, a minAgeMs below MIN_S3_GC_AGE_MS, an exclusive that is not a boolean); the drop itself: s3-drop-unbound-entries.test.ts', async () => {
    // The method touches no transport before its checks: a store object without one shows it.
    const store = Object.create(S3CacheStore.prototype, { root: { value: 's3://bucket/cache/' }, closed: { value: false } }) as S3CacheStore;
    expect(await catchError(() => store.dropUnboundEntries({ force: true } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('unknown option "force"') });
    expect(await catchError(() => store.dropUnboundEntries({ dryRun: true, minAgeMs: 60_000 }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      path: 's3://bucket/cache/',
      details: { option: 'minAgeMs', minAgeMs: 60_000, floor: 35 * 60_000 },
    });
    expect(await catchError(() => store.dropUnboundEntries({ minAgeMs: -1 }))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('non-negative') });
    expect(await catchError(() => store.dropUnboundEntries({ exclusive: 1 } as never))).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'exclusive' } });
  });
});
