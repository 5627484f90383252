// A journal append whose write landed but whose datasync failed (EIO, ENOSPC on writeback): Linux
// marks the failed pages clean, so those bytes may never reach the disk, yet later reads of the file
// see them. The store must take such a record back before it lets go of the writer lock; it was left
// in the file, applied by the next catch-up (this handle's refresh, any other process), and the next
// commit went after it: a crash that lost the failed record then cut every later commit with it.
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { JournalFile } from '../src/backend.js';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { countOpenBlobFiles } from '../src/open-blob-files.js';
import { JOURNAL_RECORD_TARGET_BYTES } from '../src/limits.js';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { catchError, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

interface Faults {
  /** Appends to fail after their bytes landed, as a failed datasync would (counted down). */
  appends: number;
  /** Fail the truncation that takes a failed append back. */
  truncates?: boolean;
  /** A handle that refreshes during the next failing append: another process reading meanwhile. */
  reader?: CacheStore | undefined;
  /** The length of every append, failed or not. */
  appended?: number[];
  /** Skip this many appends before the failing ones start (the Nth record of a commit fails). */
  skipAppends?: number;
  /** The disk fills at this journal size: an append past it writes what fits, then fails ENOSPC. */
  capacityBytes?: number;
  /** Fail making the next generation's journal, or writing the manifest (a move to the next generation). */
  createJournal?: boolean;
  writeManifest?: boolean;
}

const eio = (call: string) => Object.assign(new Error(`EIO: i/o error, ${call}`), { code: 'EIO' });

/** A store whose journals fail as `faults` says (read anew at each call, so a test may arm it later). */
async function loadWithFaults(root: string, faults: Faults): Promise<FsCacheStore> {
  class FaultyBackend extends FsBackend {
    override async openJournal(generation: number): Promise<JournalFile | undefined> {
      const journal = await super.openJournal(generation);
      if (!journal) return journal;
      const append = journal.append.bind(journal);
      const truncate = journal.truncate.bind(journal);
      journal.append = async (offsetBytes, bytes) => {
        faults.appended?.push(bytes.length);
        const room = (faults.capacityBytes ?? Infinity) - offsetBytes;
        if (bytes.length > room) {
          if (room > 0) await append(offsetBytes, bytes.subarray(0, room));
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        }
        await append(offsetBytes, bytes);
        if (faults.appends <= 0) return;
        if ((faults.skipAppends ?? 0) > 0) {
          faults.skipAppends! -= 1;
          return;
        }
        faults.appends -= 1;
        const reader = faults.reader;
        faults.reader = undefined;
        await reader?.refresh();
        throw eio('fdatasync');
      };
      journal.truncate = async (lengthBytes) => {
        if (faults.truncates === true) throw eio('ftruncate');
        return truncate(lengthBytes);
      };
      return journal;
    }

    override async createJournal(generation: number, header: Uint8Array): Promise<void> {
      if (faults.createJournal === true) throw eio('open');
      return super.createJournal(generation, header);
    }

    override async writeManifest(bytes: Uint8Array): Promise<void> {
      if (faults.writeManifest === true) throw eio('rename');
      return super.writeManifest(bytes);
    }
  }
  return FsCacheStore.load(new FaultyBackend(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
}

/** About 9 MB of aliases (1 KB shard names) over `tensors` (3 of them): a commit of two journal records. */
function twoRecordAliases(tensors: readonly { key: string; bytes: Uint8Array }[], letter: string) {
  return Array.from({ length: 9000 }, (_, i) => {
    const t = tensors[i % 3]!; // MAX_SLICE_KEYS_PER_ENTRY: 3000 each
    return { key: t.key, shardName: `${letter.repeat(1000)}-${i}`, offsetBytes: 0, sizeBytes: t.bytes.length };
  });
}

/** Reopens the cache at `root` and checks which keys it holds, and that it verifies. */
async function expectOnReopen(root: string, present: readonly string[], absent: readonly string[] = []): Promise<void> {
  const reopened = await openCacheStore(root, { compactOnClose: false });
  try {
    for (const key of present) expect(reopened.getEntry(key), key).toBeDefined();
    for (const key of absent) expect(reopened.getEntry(key), key).toBeUndefined();
    expect((await reopened.verify()).ok).toBe(true);
  } finally {
    await reopened.close();
  }
}

it('an append whose datasync failed is cut back off the journal: never applied later, and the next commit does not follow it', async () => {
  const { root, tensors } = await makeCache();
  const journalPath = join(root, 'journal.2');
  const e1 = makeTensor([30, 5], 9201);
  const e2 = makeTensor([20, 9], 9202);
  const faults: Faults = { appends: 1, truncates: false };
  const store = await loadWithFaults(root, faults);
  try {
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1', [['e1.safetensors', 0, e1.bytes.length]])))).code).toBe('EIO');
    // Cut back, then moved to the next generation (readers that applied the record reload).
    expect(store.generation).toBe(3);
    expect((await stat(join(root, 'journal.3'))).size).toBe(JOURNAL_HEADER_BYTES);
    await expect(stat(journalPath)).rejects.toMatchObject({ code: 'ENOENT' });
    await store.refresh();
    expect(store.getEntry(e1.key)).toBeUndefined();
    const other = await openCacheStore(root, { compactOnClose: false });
    expect(other.getEntry(e1.key)).toBeUndefined();
    await other.close();
    // The next commit goes where the failed one would have: nothing unsynced stands before it.
    await store.addEntry(toInput(e2, 'e2', [['e2.safetensors', 0, e2.bytes.length]]));
  } finally {
    await store.close();
  }
  const reopened = await openCacheStore(root);
  try {
    expect(reopened.getEntry(tensors[0]!.key)).toBeDefined();
    expect(reopened.getEntry(e1.key)).toBeUndefined();
    expect(reopened.lookupBySlice('e2.safetensors', 0, e2.bytes.length)?.key).toBe(e2.key);
    expect((await reopened.verify()).ok).toBe(true);
  } finally {
    await reopened.close();
  }
});

it('a failed append that cannot be cut back is taken back by the move to the next generation, whose seal is written over it; the handle goes on', async () => {
  const { root } = await makeCache();
  const e1 = makeTensor([30, 5], 9211);
  const e2 = makeTensor([20, 9], 9212);
  const store = await loadWithFaults(root, { appends: 1, truncates: true });
  try {
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1')))).code).toBe('EIO');
    expect(store.generation).toBe(3);
    expect(store.getEntry(e1.key)).toBeUndefined();
    await store.addEntry(toInput(e2, 'e2'));
  } finally {
    await store.close();
  }
  await expectOnReopen(root, [e2.key], [e1.key]);
});

it('when neither the cut-back nor the move to the next generation works, the handle refuses every later write (typed)', async () => {
  const { root, tensors } = await makeCache();
  const e1 = makeTensor([30, 5], 9213);
  const e2 = makeTensor([20, 9], 9214);
  const store = await loadWithFaults(root, { appends: 2, truncates: true }); // the commit, then the move's seal
  try {
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1')))).code).toBe('EIO');
    const refused = await catchError(() => store.addEntry(toInput(e2, 'e2')));
    expect(refused.code).toBe('IO_ERROR');
    expect(refused.message).toMatch(/could not be taken back/);
    // (Reads may still see the failed record, as other processes do: its blob was made durable
    // before it; what must not happen is a commit appended after it by this handle.)
    expect(store.getEntry(e2.key)).toBeUndefined();
    const known = tensors[0]!;
    expect((await catchError(() => store.aliasSlice(known.key, 'x.safetensors', 0, known.bytes.length))).message).toMatch(/could not be taken back/);
  } finally {
    await store.close().catch(() => undefined);
  }
});

it('a seal cut back after its sync failed is not trusted by a reader that read it: it reloads, and finishes no compaction from its stale state (found by the fault sweep)', async () => {
  const { root } = await makeCache();
  const first = await openCacheStore(root, { compactOnClose: false });
  await first.addEntry(toInput(makeTensor([8, 8], 9321), 'in-journal')); // something to compact
  await first.close();
  const faults: Faults = { appends: 0 };
  const writer = await loadWithFaults(root, faults);
  const reader = await openCacheStore(root, { compactOnClose: false });
  const [e2, mine] = [makeTensor([20, 9], 9322), makeTensor([10, 9], 9323)];
  try {
    Object.assign(faults, { appends: 1, reader }); // the seal's sync fails while the reader reads it
    expect((await catchError(() => writer.compact())).code).toBe('EIO');
    const other = await openCacheStore(root, { compactOnClose: false });
    await other.addEntry(toInput(e2, 'e2')); // where the seal stood
    await other.close();
    await reader.addEntry(toInput(mine, 'mine'));
    expect(reader.getEntry(e2.key)).toBeDefined();
  } finally {
    await writer.close().catch(() => undefined);
    await reader.close();
  }
  await expectOnReopen(root, [e2.key, mine.key]);
});

it('a journal that fails to stat or read is IO_ERROR naming it (was the raw Node error, which the builder blamed on the model file), and a failed open closes its journal', async () => {
  const { root } = await makeCache();
  let journal: JournalFile | undefined;
  let closes = 0;
  let failReads = false;
  class CapturingBackend extends FsBackend {
    override async openJournal(generation: number): Promise<JournalFile | undefined> {
      const opened = await super.openJournal(generation);
      if (!opened) return opened;
      // The fault goes below the journal object, into its reader's file handle: reads past the header.
      const reader = (opened as unknown as { reader: { read(...args: unknown[]): Promise<unknown> } }).reader;
      const read = reader.read.bind(reader);
      const close = opened.close.bind(opened);
      reader.read = (...args: unknown[]) => (failReads && (args[3] as number) >= JOURNAL_HEADER_BYTES ? Promise.reject(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })) : read(...args));
      opened.close = () => {
        closes += 1;
        return close();
      };
      journal = opened;
      return opened;
    }
  }
  const settings = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false };
  const store = await FsCacheStore.load(new CapturingBackend(root), settings);
  // The descriptor under the journal's handle goes bad.
  await (journal as unknown as { reader: { close(): Promise<void> } }).reader.close();
  const error = await catchError(() => store.refresh());
  expect(error.code).toBe('IO_ERROR');
  expect(error.path).toBe(join(root, 'journal.2'));
  expect(error.message).toMatch(/cannot stat the journal/);
  await store.close().catch(() => undefined);
  // A journal with a record past its header.
  const writer = await openCacheStore(root, { compactOnClose: false });
  const extra = makeTensor([10, 3], 9221);
  await writer.addEntry(toInput(extra, 'extra'));
  await writer.close();
  // A record past the header that cannot be read: the open fails typed and keeps no descriptor.
  failReads = true;
  closes = 0;
  const failed = await catchError(() => FsCacheStore.load(new CapturingBackend(root), settings));
  expect(failed.code).toBe('IO_ERROR');
  expect(failed.message).toMatch(/cannot read the journal \[EIO\]/);
  expect(closes).toBe(1);
});

it('a close whose compaction fails still closes the blob descriptors kept for reads', async () => {
  const { root, tensors } = await makeCache();
  class NoCompactionBackend extends FsBackend {
    override async createJournal(generation: number, header: Uint8Array): Promise<void> {
      if (generation > 2) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
      return super.createJournal(generation, header);
    }
  }
  const store = await FsCacheStore.load(new NoCompactionBackend(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: true });
  const before = countOpenBlobFiles();
  const t = tensors[0]!;
  store.readBlobSync(t.key, new Uint8Array(store.getEntry(t.key)!.compBytes)); // keeps its descriptor
  expect(countOpenBlobFiles()).toBe(before + 1);
  await store.addEntry(toInput(makeTensor([8, 8], 9231), 'more')); // something to compact
  expect((await catchError(() => store.close())).message).toMatch(/cannot compact on close/);
  expect(countOpenBlobFiles()).toBe(before);
});

it('a damaged record with intact ones after it is not a torn tail: readers go on, verify reports JOURNAL_INVALID, writers and gc refuse to cut it', async () => {
  const { root, tensors } = await makeCache();
  const added = [makeTensor([16, 4], 9241), makeTensor([12, 8], 9242), makeTensor([20, 3], 9243)];
  const writer = await openCacheStore(root, { compactOnClose: false });
  for (const [i, t] of added.entries()) await writer.addEntry(toInput(t, `later.${i}`)); // one record each
  await writer.close();
  const path = join(root, 'journal.2');
  const intact = await readFile(path);
  const damaged = Buffer.from(intact);
  damaged[JOURNAL_HEADER_BYTES + 12 + 40]! ^= 0x01; // one bit in the first record's body
  await writeFile(path, damaged);

  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(store.getEntry(tensors[0]!.key)).toBeDefined(); // the manifest's entry reads as before
    for (const t of added) expect(store.getEntry(t.key)).toBeUndefined();
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems[0]).toMatchObject({ code: 'JOURNAL_INVALID', message: expect.stringMatching(/intact record follows/) });
    expect((await catchError(() => store.addEntry(toInput(makeTensor([4, 4], 9244), 'new')))).code).toBe('JOURNAL_INVALID');
    expect((await catchError(() => store.gc({ minAgeMs: 0 }))).code).toBe('JOURNAL_INVALID');
    expect((await catchError(() => store.gc({ dryRun: true }))).code).toBe('JOURNAL_INVALID');
  } finally {
    await store.close();
  }
  // Nothing was cut or removed: with the bit put back, every commit and its blob is there.
  expect(Buffer.from(await readFile(path)).equals(damaged)).toBe(true);
  await writeFile(path, intact);
  const repaired = await openCacheStore(root);
  try {
    for (const t of added) expect(repaired.getEntry(t.key)).toBeDefined();
    expect((await repaired.verify({ decode: true })).ok).toBe(true);
  } finally {
    await repaired.close();
  }
});

it('a reader that applied the failed record before it was cut back reloads: later commits, its own and the writer\'s, all stay (found by review)', async () => {
  const { root } = await makeCache();
  const faults: Faults = { appends: 1 }; // another handle refreshes during the slow, failing datasync
  const writer = await loadWithFaults(root, faults);
  const reader = await openCacheStore(root, { compactOnClose: false });
  faults.reader = reader;
  const [e1, e2, e3] = [makeTensor([30, 5], 9301), makeTensor([20, 9], 9302), makeTensor([10, 9], 9303)];
  try {
    expect((await catchError(() => writer.addEntry(toInput(e1, 'e1')))).code).toBe('EIO');
    expect(reader.getEntry(e1.key)).toBeDefined(); // it applied the record that was then taken back
    // A longer record, reported durable: written where the failed one stood, had the cache not moved on.
    await writer.addEntry(toInput(e2, 'model.layers.0.a.much.longer.qualified.name.weight', [['e2-long-shard-name.safetensors', 0, e2.bytes.length], ['e2-other.safetensors', 128, e2.bytes.length]]));
    await reader.refresh();
    expect(reader.getEntry(e1.key)).toBeUndefined();
    expect(reader.getEntry(e2.key)).toBeDefined();
    await reader.addEntry(toInput(e3, 'e3'));
  } finally {
    await writer.close();
    await reader.close();
  }
  await expectOnReopen(root, [e2.key, e3.key], [e1.key]);
});

it('a reader whose applied record was cut back and written over, the move to a new generation having failed too, reloads instead of reading on from the middle (found by the second review)', async () => {
  const { root } = await makeCache();
  const faults: Faults = { appends: 2 }; // the commit, then the seal of the move; the reader reads during the first
  const sick = await loadWithFaults(root, faults);
  const reader = await openCacheStore(root, { compactOnClose: false });
  faults.reader = reader;
  const [e1, e2, e3] = [makeTensor([30, 5], 9311), makeTensor([20, 9], 9312), makeTensor([10, 9], 9313)];
  try {
    expect((await catchError(() => sick.addEntry(toInput(e1, 'e1')))).code).toBe('EIO');
    expect(sick.generation).toBe(2); // the move failed: the handle writes no more
    expect((await catchError(() => sick.addEntry(toInput(e2, 'e2')))).message).toMatch(/could not move to a new generation/);
    expect(reader.getEntry(e1.key)).toBeDefined();
    // Another process writes a longer record where the failed one stood; then the reader writes.
    const other = await openCacheStore(root, { compactOnClose: false });
    await other.addEntry(toInput(e2, 'model.layers.0.a.much.longer.qualified.name.weight', [['e2-long-shard-name.safetensors', 0, e2.bytes.length], ['e2-other.safetensors', 128, e2.bytes.length]]));
    await other.close();
    await reader.addEntry(toInput(e3, 'e3'));
    expect(reader.getEntry(e1.key)).toBeUndefined();
    expect(reader.getEntry(e2.key)).toBeDefined();
  } finally {
    await sick.close().catch(() => undefined);
    await reader.close();
  }
  await expectOnReopen(root, [e2.key, e3.key], [e1.key]);
});

it('a commit of several records is written record by record, each made durable before the next (a crash tears the last only)', async () => {
  const { root, tensors } = await makeCache(3);
  const appends: number[] = [];
  const store = await loadWithFaults(root, { appends: 0, appended: appends });
  try {
    // ~1 KB an alias: above JOURNAL_RECORD_TARGET_BYTES in one call, so at least two records.
    const items = Array.from({ length: 9000 }, (_, i) => {
      const t = tensors[i % 3]!; // MAX_SLICE_KEYS_PER_ENTRY: 3000 each
      return { key: t.key, shardName: `${'s'.repeat(1000)}-${i}`, offsetBytes: 0, sizeBytes: t.bytes.length };
    });
    expect((await store.aliasSlices(items)).every(Boolean)).toBe(true);
    expect(appends.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...appends)).toBeLessThanOrEqual(JOURNAL_RECORD_TARGET_BYTES + 4096);
  } finally {
    await store.close();
  }
  const reopened = await openCacheStore(root, { compactOnClose: false });
  expect(reopened.lookupBySlice(`${'s'.repeat(1000)}-8999`, 0, tensors[2]!.bytes.length)?.key).toBe(tensors[2]!.key);
  await reopened.close();
});

it('the second record of a failed two-record commit whose cut-back fails: the move seals where the commit began and zeros the rest, so a reader that applied both reloads; no failed op comes back and later commits stay (found by the third review)', async () => {
  const { root, tensors } = await makeCache(3);
  const faults: Faults = { appends: 0 };
  const sick = await loadWithFaults(root, faults);
  const reader = await openCacheStore(root, { compactOnClose: false });
  const e3 = makeTensor([10, 9], 9331);
  const failed = [`${'s'.repeat(1000)}-8999`, 0, tensors[2]!.bytes.length] as const;
  try {
    // Record 2 lands and its datasync fails while the reader reads; the cut-back fails; the move's
    // manifest write fails (its seal is written).
    Object.assign(faults, { appends: 1, skipAppends: 1, reader, truncates: true, writeManifest: true });
    expect((await catchError(() => sick.aliasSlices(twoRecordAliases(tensors, 's')))).code).toBe('EIO');
    expect(reader.lookupBySlice(...failed)).toBeDefined(); // it applied both records
    await reader.addEntry(toInput(e3, 'e3')); // reported durable
  } finally {
    await sick.close().catch(() => undefined);
    await reader.close();
  }
  const writer = await openCacheStore(root, { compactOnClose: false });
  try {
    await writer.compact(); // any writer session finishes a move left half done
    expect(writer.lookupBySlice(...failed), 'never durable').toBeUndefined();
  } finally {
    await writer.close();
  }
  await expectOnReopen(root, [e3.key]);
}, 60_000);

it('a failed two-record commit whose move cannot make the next journal is sealed all the same (an interrupted compaction the next writer finishes), so no other commit is written over it where a reader that applied it would miss the change (found by the third review)', async () => {
  const { root, tensors } = await makeCache(3);
  const faults: Faults = { appends: 0 };
  const sick = await loadWithFaults(root, faults);
  const reader = await openCacheStore(root, { compactOnClose: false });
  const aItems = twoRecordAliases(tensors, 's');
  // Another writer's commit: another first record of the same length, the same second one.
  const bItems = aItems.map((item, i) => (i < 7000 ? { ...item, shardName: item.shardName.replace(/^s+/, 't'.repeat(1000)) } : item));
  const slice = (letter: string, i: number) => [`${letter.repeat(1000)}-${i}`, 0, tensors[i % 3]!.bytes.length] as const;
  let otherDurable = false;
  try {
    Object.assign(faults, { appends: 1, skipAppends: 1, reader, createJournal: true });
    expect((await catchError(() => sick.aliasSlices(aItems))).code).toBe('EIO');
    expect(reader.lookupBySlice(...slice('s', 0))).toBeDefined();
    // The other writer's disk cannot make files either (its own moves fail).
    const other = await loadWithFaults(root, { appends: 0, createJournal: true });
    otherDurable = await other.aliasSlices(bItems).then((bound) => bound.every(Boolean), () => false);
    await other.close().catch(() => undefined);
    await reader.compact(); // a writer session: what it folds into the manifest is what it holds
  } finally {
    await sick.close().catch(() => undefined);
    await reader.close();
  }
  const again = await openCacheStore(root, { compactOnClose: false });
  try {
    expect(again.lookupBySlice(...slice('s', 0)), 'never durable').toBeUndefined();
    if (otherDurable) expect(again.lookupBySlice(...slice('t', 0)), 'reported durable').toBeDefined();
    expect((await again.verify()).ok).toBe(true);
  } finally {
    await again.close();
  }
}, 60_000);

it('a disk that fills part way through a record: nothing whole was written, so the bytes are cut back and the handle goes on once there is room (found by the fourth review)', async () => {
  const { root } = await makeCache();
  const faults: Faults = { appends: 0 };
  const store = await loadWithFaults(root, faults);
  const [e1, e2] = [makeTensor([30, 5], 9341), makeTensor([20, 9], 9342)];
  try {
    faults.capacityBytes = (await stat(join(root, 'journal.2'))).size + 40; // full 40 bytes into the record
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1')))).code).toBe('ENOSPC');
    expect((await stat(join(root, 'journal.2'))).size).toBe(JOURNAL_HEADER_BYTES); // cut back, no move needed
    faults.capacityBytes = undefined; // room again
    await store.addEntry(toInput(e2, 'e2'));
    expect(store.generation).toBe(2);
  } finally {
    await store.close();
  }
  await expectOnReopen(root, [e2.key], [e1.key]);
});
