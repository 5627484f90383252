import type { StorageBackend } from './backend.js';
import { StoreError } from './errors.js';
import { JOURNAL_HEADER_BYTES, JOURNAL_RECORD_HEADER_BYTES, checkJournalHeader, framedRecordBytes, isIntactRecord } from './journal-format.js';
import { MAX_GENERATION } from './limits.js';
import { peekGeneration } from './manifest-format.js';

/** As journalFileName writes them (no leading zero: `journal.02` is no journal of this cache). */
const JOURNAL_NAME = /^journal\.([1-9]\d{0,9})$/;

/** Every `journal.<G>` file in the cache's root (not blobs/), oldest first, with its size. */
export async function listJournalFiles(backend: StorageBackend): Promise<{ generation: number; sizeBytes: number }[]> {
  const files = await backend.listFiles((name) => JOURNAL_NAME.test(name), { rootOnly: true });
  return files
    .filter((file) => file.dir === '' && file.isFile)
    .map((file) => ({ generation: Number(JOURNAL_NAME.exec(file.name)![1]), sizeBytes: file.sizeBytes }))
    .filter(({ generation }) => generation <= MAX_GENERATION)
    .sort((a, b) => a.generation - b.generation);
}

/**
 * A journal of a generation above `generation` whose header is its own and whose first record is
 * intact: commits made after a manifest newer than the one in place, so that one is an older copy
 * put back (by hand, a backup tool), and those commits are only in this journal. A compaction never
 * writes a record into the next generation's journal before a manifest names it (an empty one is
 * what an interrupted compaction leaves). Undefined when there is none.
 */
export async function findNewerJournal(backend: StorageBackend, generation: number): Promise<{ generation: number; path: string } | undefined> {
  const newer = (await listJournalFiles(backend))
    .filter((file) => file.generation > generation && file.sizeBytes > JOURNAL_HEADER_BYTES + JOURNAL_RECORD_HEADER_BYTES)
    .map((file) => file.generation);
  for (const n of newer) {
    const journal = await backend.openJournal(n).catch(() => undefined);
    if (journal === undefined) continue;
    try {
      checkJournalHeader(await journal.read(0, JOURNAL_HEADER_BYTES), n, journal.path);
      const size = await journal.size();
      const total = framedRecordBytes(await journal.read(JOURNAL_HEADER_BYTES, JOURNAL_RECORD_HEADER_BYTES));
      if (total !== undefined && JOURNAL_HEADER_BYTES + total <= size && isIntactRecord(await journal.read(JOURNAL_HEADER_BYTES, total))) {
        // The manifest read now, after the records were seen: a writer names a journal in a
        // manifest before it appends there, so a healthy cache's manifest names this one or a later
        // one by now (a compaction and a commit that ran after the caller read its generation: a
        // reader's verify, a dry-run gc). Only a manifest still older is an older copy.
        const onDisk = await backend.readManifest().catch(() => undefined);
        if (onDisk !== undefined && (peekGeneration(onDisk) ?? 0) >= n) return undefined;
        return { generation: n, path: journal.path };
      }
    } catch {
      // Not a journal of ours, or damaged: not evidence of newer commits.
    } finally {
      await journal.close().catch(() => undefined);
    }
  }
  return undefined;
}

/**
 * MANIFEST_INVALID for a manifest (at `path`, of `generation`) that is an older copy put back beside
 * `newer` (findNewerJournal), as gc, a compaction, verify and the recovery's own check report it:
 * `lead` opens the message (who refuses), `consequence` follows it (what is refused or left undone).
 */
export function olderManifestCopyError(
  path: string,
  generation: number,
  newer: { generation: number; path: string },
  { lead = '', consequence }: { lead?: string; consequence?: string } = {},
): StoreError {
  return new StoreError(
    'MANIFEST_INVALID',
    `${lead}the manifest (generation ${generation}) is older than ${newer.path}, which holds commits made after a newer manifest: an older copy put back${consequence === undefined ? '' : `; ${consequence}`}`,
    { path, details: { reason: 'older-copy', generation, newerJournal: newer.generation } },
  );
}
