import { findNewerJournal, olderManifestCopyError } from './find-newer-journal.js';
import { JOURNAL_HEADER_BYTES } from './journal-format.js';
import type { ListedFile, StorageBackend } from './backend.js';
import { isContentKey } from './validate-entry.js';
import type { StoreState } from './store-state.js';
import type { GcOptions, GcReport } from './types.js';
import { isAbandonedTemp, TEMP_FILE_PATTERN } from './remove-abandoned-temp-files.js';
import { removeFilesLimited } from './remove-files-limited.js';
import { checkBlobsDirectoryOwn } from './check-blobs-directory.js';

const JOURNAL_PATTERN = /^journal\.(\d+)$/;
const BLOB_PATTERN = /^([0-9a-f]{40})\.bin$/;

function relative(file: ListedFile): string {
  return file.dir ? `${file.dir}/${file.name}` : file.name;
}

/** What the writer session (or, in a dry run, the read-only look) found before gc ran. */
export interface GcSession {
  /** Lock files of dead holders recovered to take the writer lock (absolute paths). */
  recoveredLocks: readonly string[];
  /** The journal an interrupted compaction folded (or in a dry run would fold): reported, gone once done. */
  finishedCompaction: string | undefined;
  /** Dry run, no lock held: judge `lock` itself, whose dead holder a real gc would recover. */
  inspectLock: boolean;
}

/**
 * Runs under the writer lock with the state caught up: removes blobs no entry references, temp files
 * of dead writers, journals of other generations and break markers of dead holders. A live writer's
 * staged temp file is kept; its commit re-publishes the blob if this removed an uncommitted name.
 * A dry run runs without the lock and removes nothing (`generation`: the one a real gc would reach).
 */
export async function collectGarbage(
  backend: StorageBackend,
  state: StoreState,
  generation: number,
  session: GcSession,
  options: GcOptions,
): Promise<GcReport> {
  // Beside an older copy of the manifest put back, the blobs of the newer journal's entries read as
  // orphans (and were removed, losing those commits for good): no gc until recoverDamagedManifest.
  const newer = await findNewerJournal(backend, generation);
  if (newer !== undefined) {
    throw olderManifestCopyError(backend.describe('manifest.json'), generation, newer, {
      lead: 'gc refuses: ',
      consequence: 'the blobs of those commits would read as orphans; `splitzip build <model> --out <cache> --repair` (recoverDamagedManifest) replays them first',
    });
  }
  // Through a linked blobs/ every blob of another cache reads as an orphan (dry run too: its report would list them).
  await checkBlobsDirectoryOwn(backend, options.dryRun === true ? 'gc (dry run)' : 'gc');
  const started = performance.now();
  const report: GcReport = {
    dryRun: options.dryRun === true,
    orphanBlobs: [],
    orphanBytes: 0,
    tempFiles: [],
    keptTempFiles: [],
    keptTempBytes: 0,
    oldJournals: session.finishedCompaction === undefined ? [] : [session.finishedCompaction],
    staleLocks: session.recoveredLocks.map((path) => path.slice(backend.root.length + 1)),
    unknownFiles: [],
    durationMs: 0,
    ...(session.finishedCompaction === undefined ? {} : { finishedCompaction: session.finishedCompaction }),
  };
  const remove: ListedFile[] = [];
  for (const listed of await backend.listFileNames()) {
    if (listed.dir === 'blobs' && !TEMP_FILE_PATTERN.test(listed.name)) {
      // Blobs are judged by name and type; only an orphan's size is looked up (an lstat of every
      // blob was most of gc's time on a large cache). Anything else there is someone else's.
      const blob = BLOB_PATTERN.exec(listed.name);
      if (!listed.isFile || blob === null || !isContentKey(blob[1])) {
        report.unknownFiles.push(relative(listed));
        continue;
      }
      if (state.entries.has(blob[1])) continue;
      // Undefined: removed since it was listed (as a file gone before its lstat always was).
      const orphan = await backend.statFile(listed);
      if (orphan === undefined) continue;
      report.orphanBlobs.push(relative(orphan));
      report.orphanBytes += orphan.sizeBytes;
      remove.push(orphan);
      continue;
    }
    // The root's few files and temp files: judged by size or age.
    const file = await backend.statFile(listed);
    if (file === undefined) continue;
    if (file.dir === '' && file.name === 'lock') {
      if (session.inspectLock && (await backend.isLockFileStale(file))) report.staleLocks.push(relative(file));
      continue;
    }
    if (!file.isFile) {
      // Whatever its name, the store never makes a directory, link or FIFO there: someone else's.
      report.unknownFiles.push(relative(file));
      continue;
    }
    if (TEMP_FILE_PATTERN.test(file.name)) {
      if (isAbandonedTemp(file)) {
        report.tempFiles.push(relative(file));
        remove.push(file);
      } else {
        report.keptTempFiles!.push(relative(file));
        report.keptTempBytes! += file.sizeBytes;
      }
      continue;
    }
    if (file.name === 'manifest.json') continue;
    const journal = JOURNAL_PATTERN.exec(file.name);
    if (journal) {
      // A newer journal holding records is no leftover: the manifest beside it is an older copy
      // (restored by hand or a backup tool) and those commits are only there; kept, for
      // `splitzip build --repair` (recoverDamagedManifest). Only an empty one (a compaction's, not
      // yet named) is removed.
      if (Number(journal[1]) > generation && file.sizeBytes > JOURNAL_HEADER_BYTES) {
        report.unknownFiles.push(relative(file));
        continue;
      }
      if (Number(journal[1]) !== generation && !report.oldJournals.includes(relative(file))) {
        report.oldJournals.push(relative(file));
        remove.push(file);
      }
      continue;
    }
    if (file.name.startsWith('lock.break-')) {
      if (await backend.isLockFileStale(file)) {
        report.staleLocks.push(relative(file));
        remove.push(file);
      }
      continue;
    }
    report.unknownFiles.push(relative(file));
  }
  // A few at once (an unlink mostly waits on the file system), stopping at a failure as a loop
  // would: its error (the first in the listing's order) is gc's.
  // A removal the file system refused (a read-only blobs/, another user's files) is NOT_WRITABLE,
  // as the lock's creation says it (removeFile's own error): gc writes the cache.
  if (!report.dryRun) await removeFilesLimited(backend, remove, { stopAtFailure: true });
  report.durationMs = performance.now() - started;
  return report;
}
