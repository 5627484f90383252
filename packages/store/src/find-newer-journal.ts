import type { StorageBackend } from './backend.js';
import { JOURNAL_HEADER_BYTES, JOURNAL_RECORD_HEADER_BYTES, checkJournalHeader, framedRecordBytes, isIntactRecord } from './journal-format.js';
import { MAX_GENERATION } from './limits.js';

/** As journalFileName writes them (no leading zero). */
const JOURNAL_NAME = /^journal\.([1-9]\d{0,9})$/;

/**
 * A journal of a generation above `generation` whose header is its own and whose first record is
 * intact: commits made after a manifest newer than the one in place, so that one is an older copy
 * put back (by hand, a backup tool), and those commits are only in this journal. A compaction never
 * writes a record into the next generation's journal before a manifest names it (an empty one is
 * what an interrupted compaction leaves). Undefined when there is none.
 */
export async function findNewerJournal(backend: StorageBackend, generation: number): Promise<{ generation: number; path: string } | undefined> {
  const files = await backend.listFiles((name) => JOURNAL_NAME.test(name), { rootOnly: true });
  const newer = files
    .filter((file) => file.dir === '' && file.isFile && file.sizeBytes > JOURNAL_HEADER_BYTES + JOURNAL_RECORD_HEADER_BYTES)
    .map((file) => Number(JOURNAL_NAME.exec(file.name)![1]))
    .filter((n) => n > generation && n <= MAX_GENERATION)
    .sort((a, b) => a - b);
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
        if (onDisk !== undefined && (readGeneration(onDisk) ?? 0) >= n) return undefined;
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

/** The `generation` of manifest bytes, undefined when they do not parse. */
function readGeneration(bytes: Uint8Array): number | undefined {
  try {
    const value = (JSON.parse(new TextDecoder().decode(bytes)) as { generation?: unknown } | null)?.generation;
    return typeof value === 'number' ? value : undefined;
  } catch {
    return undefined;
  }
}
