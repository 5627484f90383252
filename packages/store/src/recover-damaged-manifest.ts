import { realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import { DEFAULT_CHUNK_SIZE } from '@splitzip/codec';
import type { JournalFile, StorageBackend } from './backend.js';
import { StoreError, isStoreError } from './errors.js';
import { FsBackend } from './fs-backend.js';
import { JOURNAL_HEADER_BYTES, checkJournalHeader, encodeJournalHeader } from './journal-format.js';
import { DEFAULT_LOCK_TIMEOUT_MS, MAX_GENERATION } from './limits.js';
import { parseManifest, serializeManifest } from './manifest-format.js';
import { salvageJournalRecords } from './salvage-journal-records.js';
import { salvageManifest } from './salvage-manifest.js';
import { isS3Url, looksLikeOtherUrl } from './s3-layout.js';
import { StoreState } from './store-state.js';
import { verifyEntries } from './verify-entries.js';

/** The seed's coverage gate (open-cache-store's default, repeated: that module imports the S3 store). */
const DEFAULT_COVERAGE_MIN = 0.99;

export interface RecoverDamagedManifestOptions {
  /** How long to wait for the writer lock (default DEFAULT_LOCK_TIMEOUT_MS). */
  lockTimeoutMs?: number | undefined;
  /** Ends the wait for the lock, and the blob checks between entries (ABORTED). */
  signal?: AbortSignal | undefined;
  /** Called before the first and after each salvaged entry's blob check (a large cache decodes every blob once): entries and their blob bytes. */
  onProgress?: ((progress: ManifestRecoveryProgress) => void) | undefined;
}

export interface ManifestRecoveryProgress {
  done: number;
  total: number;
  doneBytes: number;
  totalBytes: number;
}

/** What recoverDamagedManifest did. */
export interface ManifestRecovery {
  /** The damaged manifest's path, and the name its bytes were kept under (never read again; gc lists it as unknown). */
  manifest: string;
  keptAs: string;
  /** The journal whose intact records went into the new generation (null: none of this cache's could be told). */
  journalGeneration: number | null;
  /** The cache's new generation. */
  generation: number;
  /** Entries whose text still read and whose blob decodes to their content key (and recorded digests): kept, without bindings. */
  salvagedEntries: number;
  /** Keys of entries whose text could not be read, or whose blob is missing, damaged or another tensor's (where the key itself was readable). */
  droppedEntries: string[];
  /**
   * Slice bindings the manifest listed for the salvaged entries, none kept: the damage cannot be
   * located (one checksum covers the file), and a changed digit in an offset binds a slice to
   * another tensor of the same size. Loads find the entries by content key and bind them again;
   * `splitzip build <model> --repair` binds a model's at once.
   */
  droppedBindings: number;
  salvagedRecords: number;
  droppedRecords: number;
  droppedOps: number;
  /** Settings the manifest no longer stated readably, now the defaults ('chunkSize', 'coverageMin'). */
  defaultedSettings: string[];
  /** The damage as reported (MANIFEST_INVALID). */
  reason: string;
}

/**
 * Moves a local cache whose manifest.json fails its checks (MANIFEST_INVALID: a checksum mismatch,
 * text that no longer parses, a bad top-level field) to a new generation holding what can be
 * trusted, under the writer lock: every entry whose own text still reads and whose blob decodes to
 * its content key (recorded digests checked too), without slice bindings, plus the intact records
 * of the cache's journal. The damaged bytes first get a second name (`manifest.json.damaged-<ms>`),
 * then a fresh journal, then the new manifest, whose rename is the one step that commits: a crash
 * at any point leaves the damaged cache as it was (and its kept copy) or the recovered one.
 * `null`, changing nothing, when the manifest reads intact. Any other failure to read it
 * (not a file, too large, unreadable, a newer format) is thrown as it is: nothing to salvage there.
 */
export async function recoverDamagedManifest(root: string, options: RecoverDamagedManifestOptions = {}): Promise<ManifestRecovery | null> {
  if (typeof root !== 'string' || root.length === 0) throw new StoreError('INVALID_ARGUMENT', 'root must be a directory path');
  if (isS3Url(root) || looksLikeOtherUrl(root)) {
    throw new StoreError('INVALID_ARGUMENT', 'recoverDamagedManifest repairs local caches: an s3:// cache keeps each entry in an object of its own, with no manifest file', { path: root });
  }
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  if (!Number.isFinite(lockTimeoutMs) || lockTimeoutMs < 0) {
    throw new StoreError('INVALID_ARGUMENT', 'lockTimeoutMs must be a non-negative number', { details: { lockTimeoutMs } });
  }
  const resolved = resolve(root);
  const backend = new FsBackend((await realpath(resolved).catch(() => undefined)) ?? resolved);
  return recoverManifest(backend, { ...options, lockTimeoutMs });
}

/** recoverDamagedManifest on a given backend (tests wrap one to stop at each step). */
export async function recoverManifest(
  backend: StorageBackend,
  options: RecoverDamagedManifestOptions & { lockTimeoutMs: number },
): Promise<ManifestRecovery | null> {
  const path = backend.describe('manifest.json');
  // Looked at before the lock: an intact or missing manifest takes no lock and changes nothing.
  if (!isDamaged(await backend.readManifest(), path)) return null;
  const lock = await backend.acquireWriteLock(options.lockTimeoutMs, options.signal);
  let journal: JournalFile | undefined;
  try {
    // Again under the lock: another process may have recovered (or rebuilt) it meanwhile.
    const bytes = await backend.readManifest();
    const damage = isDamaged(bytes, path);
    if (!damage) return null;
    const salvage = salvageManifest(bytes!);
    const found = await findJournalToSalvage(backend, salvage.generation);
    journal = found.journal;
    const next = found.highest + 1;
    if (next > MAX_GENERATION) throw new StoreError('SIZE_INVALID', 'manifest generation would exceed MAX_GENERATION', { path });
    // Each candidate decoded whole and its content key recomputed: a field the damage changed
    // (a shape, a digest, a codebook) fails here, never at a load.
    const onProgress = options.onProgress;
    const sizes = new Map(salvage.entries.map((entry) => [entry.key, entry.compBytes]));
    const progress = { done: 0, total: salvage.entries.length, doneBytes: 0, totalBytes: salvage.entries.reduce((sum, entry) => sum + entry.compBytes, 0) };
    onProgress?.({ ...progress });
    const report = await verifyEntries(backend, salvage.entries, next, {
      decode: true,
      signal: options.signal,
      onProgress: onProgress && (({ done, key }) => onProgress({ ...progress, done, doneBytes: (progress.doneBytes += sizes.get(key) ?? 0) })),
    });
    const failed = new Set(report.problems.map((problem) => problem.key));
    const state = StoreState.fromEntries(
      salvage.entries.filter((entry) => !failed.has(entry.key)),
      { source: 'a damaged manifest', path },
    );
    const salvagedEntries = state.entries.size;
    const records = journal === undefined ? { salvagedRecords: 0, droppedRecords: 0, droppedOps: 0 } : await salvageJournalRecords(journal, JOURNAL_HEADER_BYTES, state);
    options.signal?.throwIfAborted();
    const keptAs = await backend.keepManifestCopy!(`manifest.json.damaged-${Date.now()}`);
    const defaultedSettings = [...(salvage.chunkSize === undefined ? ['chunkSize'] : []), ...(salvage.coverageMin === undefined ? ['coverageMin'] : [])];
    const header = { generation: next, chunkSize: salvage.chunkSize ?? DEFAULT_CHUNK_SIZE, coverageMin: salvage.coverageMin ?? DEFAULT_COVERAGE_MIN };
    await backend.createJournal(next, encodeJournalHeader(next));
    await backend.writeManifest(serializeManifest(state.entries.values(), header));
    // Committed. The salvaged journal's records are in the new manifest; a failure to remove it leaves it to gc.
    await journal?.close().catch(() => undefined);
    if (found.generation !== null) await backend.removeJournal(found.generation).catch(() => undefined);
    journal = undefined;
    return {
      manifest: path,
      keptAs,
      journalGeneration: found.generation,
      generation: next,
      salvagedEntries,
      droppedEntries: [...salvage.unreadableEntries, ...report.problems.map((problem) => problem.key)],
      droppedBindings: salvage.droppedBindings,
      ...records,
      defaultedSettings,
      reason: damage.reason,
    };
  } finally {
    await journal?.close().catch(() => undefined);
    await lock.release().catch(() => undefined);
  }
}

/** The MANIFEST_INVALID a manifest's bytes fail with, if they do; any other failure is thrown; undefined when intact. */
function isDamaged(bytes: Uint8Array | undefined, path: string): StoreError | undefined {
  if (bytes === undefined) throw new StoreError('NOT_A_CACHE', 'no manifest.json: nothing to recover (a missing manifest is no damaged one)', { path });
  try {
    parseManifest(bytes, path);
    return undefined;
  } catch (error) {
    if (isStoreError(error) && error.code === 'MANIFEST_INVALID') return error;
    throw error;
  }
}

/**
 * The journal whose records follow the damaged manifest: the one of the generation it states, when
 * that still reads and the journal's header is that generation's; else, when the generation does
 * not read, the one journal of the cache with a valid header (a cache holds one between
 * compactions); else none (records of one of several cannot be told to be this manifest's).
 * `highest`: the largest generation any journal file or the manifest names, so that the new
 * generation replaces nothing.
 */
async function findJournalToSalvage(
  backend: StorageBackend,
  stated: number | undefined,
): Promise<{ journal: JournalFile | undefined; generation: number | null; highest: number }> {
  const files = await backend.listFiles((name) => /^journal\.\d{1,10}$/.test(name));
  const numbers = files
    .filter((file) => file.dir === '' && file.isFile)
    .map((file) => Number(file.name.slice('journal.'.length)))
    .filter((n) => Number.isInteger(n) && n >= 1 && n <= MAX_GENERATION);
  const highest = Math.max(stated ?? 1, ...numbers);
  const tryOpen = async (generation: number): Promise<JournalFile | undefined> => {
    const journal = await backend.openJournal(generation).catch(() => undefined);
    if (journal === undefined) return undefined;
    try {
      checkJournalHeader(await journal.read(0, JOURNAL_HEADER_BYTES), generation, journal.path);
      return journal;
    } catch {
      await journal.close().catch(() => undefined);
      return undefined;
    }
  };
  if (stated !== undefined) {
    const journal = await tryOpen(stated);
    return { journal, generation: journal === undefined ? null : stated, highest };
  }
  const valid: [number, JournalFile][] = [];
  for (const n of numbers) {
    const journal = await tryOpen(n);
    if (journal !== undefined) valid.push([n, journal]);
  }
  if (valid.length === 1) return { journal: valid[0]![1], generation: valid[0]![0], highest };
  for (const [, journal] of valid) await journal.close().catch(() => undefined);
  return { journal: undefined, generation: null, highest };
}
