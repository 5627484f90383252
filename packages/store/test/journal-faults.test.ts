// A journal append whose write landed but whose datasync failed (EIO, ENOSPC on writeback): Linux
// marks the failed pages clean, so those bytes may never reach the disk, yet later reads of the file
// see them. The store must take such a record back before it lets go of the writer lock; it was left
// in the file, applied by the next catch-up (this handle's refresh, any other process), and the next
// commit went after it: a crash that lost the failed record then cut every later commit with it.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { JournalFile } from '../src/backend.js';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { countOpenBlobFiles } from '../src/open-blob-files.js';
import { openCacheStore } from '../src/index.js';
import { catchError, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

interface Faults {
  /** Appends to fail after their bytes landed (counted down). */
  appends: number;
  /** Fail the truncation that takes a failed append back. */
  truncates: boolean;
}

/** A store whose journal appends write their bytes and then fail as a failed datasync would. */
async function loadWithFaults(root: string, faults: Faults): Promise<FsCacheStore> {
  class FaultyBackend extends FsBackend {
    override async openJournal(generation: number): Promise<JournalFile | undefined> {
      const journal = await super.openJournal(generation);
      if (!journal) return journal;
      const append = journal.append.bind(journal);
      const truncate = journal.truncate.bind(journal);
      journal.append = async (offsetBytes, bytes) => {
        await append(offsetBytes, bytes);
        if (faults.appends <= 0) return;
        faults.appends -= 1;
        throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
      };
      journal.truncate = async (lengthBytes) => {
        if (faults.truncates) throw Object.assign(new Error('EIO: i/o error, ftruncate'), { code: 'EIO' });
        return truncate(lengthBytes);
      };
      return journal;
    }
  }
  return FsCacheStore.load(new FaultyBackend(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
}

it('an append whose datasync failed is cut back off the journal: never applied later, and the next commit does not follow it', async () => {
  const { root, tensors } = await makeCache();
  const journalPath = join(root, 'journal.2');
  const before = (await stat(journalPath)).size;
  const e1 = makeTensor([30, 5], 9201);
  const e2 = makeTensor([20, 9], 9202);
  const faults: Faults = { appends: 1, truncates: false };
  const store = await loadWithFaults(root, faults);
  try {
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1', [['e1.safetensors', 0, e1.bytes.length]])))).code).toBe('EIO');
    expect((await stat(journalPath)).size).toBe(before);
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

it('when the failed append cannot be cut back either, the handle refuses every later write (typed)', async () => {
  const { root } = await makeCache();
  const e1 = makeTensor([30, 5], 9211);
  const e2 = makeTensor([20, 9], 9212);
  const store = await loadWithFaults(root, { appends: 1, truncates: true });
  try {
    expect((await catchError(() => store.addEntry(toInput(e1, 'e1')))).code).toBe('EIO');
    const refused = await catchError(() => store.addEntry(toInput(e2, 'e2')));
    expect(refused.code).toBe('IO_ERROR');
    expect(refused.message).toMatch(/could not be taken back/);
    // (Reads may still see the failed record, as other processes do: its blob was made durable
    // before it; what must not happen is a commit appended after it.)
    expect(store.getEntry(e2.key)).toBeUndefined();
    expect((await catchError(() => store.aliasSlice(e1.key, 'x.safetensors', 0, e1.bytes.length))).message).toMatch(/could not be taken back/);
  } finally {
    await store.close().catch(() => undefined);
  }
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
