import { realpath } from 'node:fs/promises';
import { resolve } from 'node:path';
import { DEFAULT_CHUNK_SIZE } from '@splitzip/codec';
import type { JournalFile, StorageBackend } from './backend.js';
import { checkRecoverOptions } from './check-options.js';
import { checkBlobsDirectoryOwn } from './check-blobs-directory.js';
import { StoreError, isStoreError } from './errors.js';
import { FsBackend } from './fs-backend.js';
import { JOURNAL_HEADER_BYTES, bindingsPerFileOfJournal, checkJournalHeader, encodeJournalHeader, journalVersionFor } from './journal-format.js';
import { DEFAULT_LOCK_TIMEOUT_MS, JOURNAL_VERSION, JOURNAL_VERSION_OBJECT_BINDINGS, JOURNAL_VERSION_ONE_BINDING, MAX_GENERATION } from './limits.js';
import { manifestFormatFor, parseManifest, serializeManifest } from './manifest-format.js';
import { findNewerJournal, listJournalFiles, olderManifestCopyError } from './find-newer-journal.js';
import { salvageJournalRecords } from './salvage-journal-records.js';
import { salvageManifest, type SalvagedManifest } from './salvage-manifest.js';
import { sameBytes } from './same-bytes.js';
import { isS3Url, looksLikeOtherUrl } from './s3-layout.js';
import { StoreState } from './store-state.js';
import type { CacheEntry } from './types.js';
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
  /**
   * The journal whose intact records went into the new generation (chooseJournal), null when no
   * journal of the cache has records or the one with the latest can be told to be superseded.
   */
  journalGeneration: number | null;
  /**
   * Second names given to journals not wholly salvaged (`journal.<G>.damaged-<ms>`: a record that
   * could not be read, a header that is not its generation's; `journal.<G>.unsalvaged-<ms>`: records
   * judged superseded, of which only the entries were taken): gc removes every journal the new
   * manifest does not name.
   */
  keptJournals: string[];
  /** The cache's new generation, and its settings as read (or the defaults: defaultedSettings). */
  generation: number;
  chunkSize: number;
  coverageMin: number;
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
  /**
   * Entries kept from the chosen journal's records, and from the other journals (kept as
   * `unsalvaged`; without their bindings), each after its blob check. With salvagedEntries (the
   * manifest's): every entry of the recovered cache.
   */
  journalEntries: number;
  otherJournalEntries: number;
  /** The chosen journal's records applied, unreadable, and ops that no longer applied. */
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
 * trusted: every entry whose own text still reads and whose blob decodes to its content key
 * (recorded digests checked too; before the writer lock is taken), without slice bindings, plus,
 * under the lock, the intact records of the journal that follows it (chooseJournal). The damaged bytes
 * first get a second name (`manifest.json.damaged-<ms>`, and `journal.<G>.damaged-<ms>` for a
 * journal not wholly read), then a fresh journal of a generation above every one there, then the
 * new manifest, whose rename is the one step that commits: a crash at any point leaves the damaged
 * cache as it was (and its kept copies) or the recovered one.
 * `null`, changing nothing, when the manifest reads intact. Any other failure to read it
 * (not a file, too large, unreadable, a newer format) is thrown as it is: nothing to salvage there.
 */
export async function recoverDamagedManifest(root: string, options: RecoverDamagedManifestOptions = {}): Promise<ManifestRecovery | null> {
  if (typeof root !== 'string' || root.length === 0) throw new StoreError('INVALID_ARGUMENT', 'root must be a directory path');
  if (isS3Url(root) || looksLikeOtherUrl(root)) {
    throw new StoreError('INVALID_ARGUMENT', 'recoverDamagedManifest repairs local caches: an s3:// cache keeps each entry in an object of its own, with no manifest file', { path: root });
  }
  checkRecoverOptions(options);
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
  // The entries are checked before the lock (every blob decoded: long on a large cache, and other
  // writers would time out behind it). Blobs are content-addressed and never rewritten but by
  // repairBlob (only a store opened before the damage could call it meanwhile, at worst dropping
  // the entry it repairs): the checks still hold once the lock is taken, as long as the manifest is
  // the same bytes (else they are made again).
  let bytes = await backend.readManifest();
  if (!(await findDamage(backend, bytes, path))) return null;
  let checked = await checkCandidates(backend, bytes!, options);
  // No writer through another cache's blobs/ (check-blobs-directory.ts).
  await checkBlobsDirectoryOwn(backend, 'recoverDamagedManifest');
  const lock = await backend.acquireWriteLock(options.lockTimeoutMs, options.signal);
  const journals: SalvageJournal[] = [];
  try {
    // Again under the lock: another process may have recovered (or rebuilt) it meanwhile.
    const again = await backend.readManifest();
    const damage = await findDamage(backend, again, path);
    if (!damage) return null;
    if (!sameBytes(again!, bytes!)) {
      bytes = again;
      checked = await checkCandidates(backend, bytes!, options);
    }
    const { salvage, entries, dropped } = checked;
    const context = { source: 'a damaged manifest', path };
    let state = StoreState.fromEntries(entries, context);
    const found = await listJournals(backend, journals);
    // Each journal surveyed first (records, seal), applied to nothing.
    for (const journal of journals) {
      const survey = await salvageJournalRecords(journal.file, JOURNAL_HEADER_BYTES, StoreState.fromEntries([], context), { bindingsPerFile: bindingsPerFileOfJournal(journal.version) });
      journal.records = survey.salvagedRecords;
      journal.sealed = survey.sealed;
    }
    const chosen = chooseJournal(journals, salvage.generation);
    const records = chosen === undefined ? { salvagedRecords: 0, droppedRecords: 0, droppedOps: 0 } : await salvageJournalRecords(chosen.file, JOURNAL_HEADER_BYTES, state, { bindingsPerFile: bindingsPerFileOfJournal(chosen.version) });
    // From every other journal with records, its entries without their bindings (after the chosen
    // one's, whose adds carry bindings): which journal follows the manifest can be misjudged (a
    // finished and an interrupted compaction leave the same files, told apart only by the damaged
    // generation), and an entry is content-addressed and checked against its blob below, so no
    // acknowledged entry is lost either way; a binding not taken is made again by the next load.
    const checkedKeys = new Set(entries.map((entry) => entry.key));
    const fromChosen = new Set([...state.entries.keys()].filter((key) => !checkedKeys.has(key)));
    for (const journal of journals) {
      if (journal !== chosen && journal.records > 0) await salvageJournalRecords(journal.file, JOURNAL_HEADER_BYTES, state, { entriesOnly: true });
    }
    // The entries the journals added are checked as the manifest's were (records have CRCs, their blobs not).
    const added = [...state.entries.values()].filter((entry) => !checkedKeys.has(entry.key));
    const addedReport = added.length === 0 ? undefined : await verifyEntries(backend, added, 1, { decode: true, signal: options.signal });
    const addedFailed = new Set(addedReport?.problems.map((problem) => problem.key));
    if (addedFailed.size > 0) state = StoreState.fromEntries([...state.entries.values()].filter((entry) => !addedFailed.has(entry.key)), context, state.bindingLevel);
    // Counted once every check is done: entries from the chosen journal, and from the others.
    const journalEntries = [...fromChosen].filter((key) => !addedFailed.has(key)).length;
    const otherJournalEntries = added.filter((entry) => !fromChosen.has(entry.key) && !addedFailed.has(entry.key)).length;
    // Above the stated generation and every journal of this cache (a stray file far above, whose
    // header is not its generation's, is stepped over, not counted: it made the number overflow).
    let next = Math.max(salvage.generation ?? 1, ...journals.filter((journal) => !journal.headerDamaged || journal === chosen).map((journal) => journal.generation)) + 1;
    while (found.includes(next)) next++;
    if (next > MAX_GENERATION) throw new StoreError('SIZE_INVALID', 'manifest generation would exceed MAX_GENERATION', { path });
    options.signal?.throwIfAborted();
    const defaultedSettings = [...(salvage.chunkSize === undefined ? ['chunkSize'] : []), ...(salvage.coverageMin === undefined ? ['coverageMin'] : [])];
    const header = { generation: next, chunkSize: salvage.chunkSize ?? DEFAULT_CHUNK_SIZE, coverageMin: salvage.coverageMin ?? DEFAULT_COVERAGE_MIN };
    // Serialised before anything changes: one above MAX_MANIFEST_BYTES is SIZE_INVALID with no copy
    // kept and no journal made (each failed attempt left another set of them).
    const manifest = serializeManifest(state.entries.values(), header, manifestFormatFor(state));
    const stamp = Date.now();
    const keptAs = await backend.keepManifestCopy!(`manifest.json.damaged-${stamp}`);
    // Second names for every journal not wholly salvaged: one with a record that could not be read,
    // one whose header is not its generation's, one with records this recovery judged superseded
    // (`unsalvaged`: kept in case it was not). gc removes every journal the new manifest does not name.
    const keptJournals: string[] = [];
    const keep = async (generation: number, why: string): Promise<void> => {
      keptJournals.push(await backend.keepJournalCopy!(generation, `journal.${generation}.${why}-${stamp}`));
    };
    for (const generation of found) {
      const journal = journals.find((j) => j.generation === generation);
      if (journal === undefined || journal.headerDamaged) await keep(generation, 'damaged');
      else if (journal === chosen && records.droppedRecords > 0) await keep(generation, 'damaged');
      else if (journal !== chosen && journal.records > 0) await keep(generation, 'unsalvaged');
    }
    await backend.createJournal(next, encodeJournalHeader(next, journalVersionFor(state)));
    await backend.writeManifest(manifest);
    // Committed. The salvaged journal's records are in the new manifest, and every other journal is
    // empty or kept under a second name: all are removed (one that cannot be is gc's).
    for (const journal of journals.splice(0)) await journal.file.close().catch(() => undefined);
    for (const generation of found) await backend.removeJournal(generation).catch(() => undefined);
    const final = new Set(state.entries.keys());
    return {
      manifest: path,
      keptAs,
      journalGeneration: chosen?.generation ?? null,
      keptJournals,
      generation: next,
      chunkSize: header.chunkSize,
      coverageMin: header.coverageMin,
      salvagedEntries: entries.length,
      droppedEntries: [...new Set([...dropped, ...addedFailed])].filter((key) => !final.has(key)),
      droppedBindings: salvage.droppedBindings,
      journalEntries,
      otherJournalEntries,
      salvagedRecords: records.salvagedRecords,
      droppedRecords: records.droppedRecords,
      droppedOps: records.droppedOps,
      defaultedSettings,
      reason: damage.reason,
    };
  } finally {
    for (const journal of journals) await journal.file.close().catch(() => undefined);
    await lock.release().catch(() => undefined);
  }
}

interface CheckedCandidates {
  salvage: SalvagedManifest;
  /** Candidates whose blob decodes to their content key (and recorded digests). */
  entries: CacheEntry[];
  /** Keys of the entries left out: unreadable, listed twice, or failing their blob's checks. */
  dropped: string[];
}

/** Salvages the candidates and checks each against its blob, decoded whole with its content key recomputed. */
async function checkCandidates(backend: StorageBackend, bytes: Uint8Array, options: RecoverDamagedManifestOptions): Promise<CheckedCandidates> {
  const salvage = salvageManifest(bytes);
  const onProgress = options.onProgress;
  const sizes = new Map(salvage.entries.map((entry) => [entry.key, entry.compBytes]));
  const progress = { done: 0, total: salvage.entries.length, doneBytes: 0, totalBytes: salvage.entries.reduce((sum, entry) => sum + entry.compBytes, 0) };
  onProgress?.({ ...progress });
  // A field the damage changed to another valid value (a shape, a digest, a codebook) fails here, never at a load.
  const report = await verifyEntries(backend, salvage.entries, salvage.generation ?? 1, {
    decode: true,
    signal: options.signal,
    onProgress: onProgress && (({ done, key }) => onProgress({ ...progress, done, doneBytes: (progress.doneBytes += sizes.get(key) ?? 0) })),
  });
  const failed = new Set(report.problems.map((problem) => problem.key));
  return {
    salvage,
    entries: salvage.entries.filter((entry) => !failed.has(entry.key)),
    dropped: [...salvage.unreadableEntries, ...failed],
  };
}

/**
 * The MANIFEST_INVALID a manifest's bytes fail with, if they do, or, for an intact manifest, the
 * one of an older copy put back beside a newer journal holding commits (findNewerJournal: those
 * commits are only there, and a writer's next compaction replaced that journal, gc removed it);
 * any other failure is thrown; undefined when all is well.
 */
async function findDamage(backend: StorageBackend, bytes: Uint8Array | undefined, path: string): Promise<StoreError | undefined> {
  if (bytes === undefined) throw new StoreError('NOT_A_CACHE', 'no manifest.json: nothing to recover (a missing manifest is no damaged one)', { path });
  let generation: number;
  try {
    generation = parseManifest(bytes, path).generation;
  } catch (error) {
    if (isStoreError(error) && error.code === 'MANIFEST_INVALID') return error;
    throw error;
  }
  const newer = await findNewerJournal(backend, generation);
  if (newer === undefined) return undefined;
  return olderManifestCopyError(path, generation, newer);
}

interface SalvageJournal {
  generation: number;
  file: JournalFile;
  /** Its header is not its generation's: its records, each with its own CRC, are still read (as recoverDamagedJournal does). */
  headerDamaged: boolean;
  /** Its header's version: 2 (its ops may add second bindings of a slice), or 1; for a damaged header, damagedHeaderVersion. */
  version: number;
  /** Intact records past the header, and whether it ends with a seal. */
  records: number;
  sealed: boolean;
}

/**
 * The journal whose records follow the damaged manifest. First the journal of the generation the
 * manifest states, when that still reads and such a journal is there (damage elsewhere in the file,
 * the usual case): a journal the manifest names is its own, whatever other journals lie beside it (an
 * old one whose removal failed after a compaction, sealed or not: replaying it brought back a
 * binding removed since and dropped the one made after it; a newer empty one a failed recovery
 * left). Else, the stated number being unreadable or naming no journal (one flipped digit: 2 → 3
 * dropped the real journal's commits, and gc then removed their blobs), the latest journal with
 * records: a cache appends to one journal at a time, never to an older one, so that is the live one,
 * or a sealed one whose compaction was interrupted (its records are needed), unless it is sealed
 * beside a newer, empty journal while the stated number reads newer (a finished compaction whose old
 * journal was left: superseded). Both a readable stated number that names a stale journal and a stale
 * journal beside an empty newer one with no readable number take a double failure; then a
 * superseded journal is replayed, and the bindings it brings back carry the file stamps a load checks.
 */
function chooseJournal(journals: readonly SalvageJournal[], stated: number | undefined): SalvageJournal | undefined {
  const named = journals.find((journal) => journal.generation === stated);
  // Not when a newer journal has records: writers append to journal G+1 only once a manifest names
  // G+1, so the named one is then an old journal left behind and the number a damaged one (a
  // rebind made since was lost to the old binding: review).
  const newerWithRecords = named !== undefined && journals.some((journal) => journal.generation > named.generation && journal.records > 0);
  if (named !== undefined && !newerWithRecords) return named.records > 0 ? named : undefined;
  const withRecords = journals.filter((journal) => journal.records > 0);
  const latest = withRecords[withRecords.length - 1];
  if (latest === undefined) return undefined;
  const newerExists = journals.some((journal) => journal.generation > latest.generation);
  if (latest.sealed && newerExists && stated !== undefined && stated > latest.generation) return undefined;
  return latest;
}

/**
 * The generations of every `journal.<G>` file of the cache (ascending); those that open (a header
 * that is their generation's, or a damaged one; not a newer format) go into `into`, oldest first
 * (the caller closes them).
 */
async function listJournals(backend: StorageBackend, into: SalvageJournal[]): Promise<number[]> {
  const generations = (await listJournalFiles(backend)).map((file) => file.generation);
  for (const generation of generations) {
    const file = await backend.openJournal(generation).catch(() => undefined);
    if (file === undefined) continue;
    let headerDamaged = false;
    let version = JOURNAL_VERSION_ONE_BINDING;
    let header: Uint8Array | undefined;
    try {
      header = await file.read(0, JOURNAL_HEADER_BYTES);
      version = checkJournalHeader(header, generation, file.path);
    } catch (error) {
      // A newer release's journal is not ours to read; a damaged header still has records to salvage.
      if (!(isStoreError(error) && error.code === 'JOURNAL_INVALID')) {
        await file.close().catch(() => undefined);
        continue;
      }
      headerDamaged = true;
      version = damagedHeaderVersion(header);
    }
    into.push({ generation, file, headerDamaged, version, records: 0, sealed: false });
  }
  return generations;
}

/**
 * The version to replay a journal with whose header is damaged: its version field where that still
 * reads 1, 2 or 3 (the damage is elsewhere: magic, generation), else 3. Read as 1, a format-3 cache's
 * journal lost every op adding a second binding, and an add among them its whole entry (its blob
 * then an orphan); read as 3, every op is still checked (isValidBindingSet), and an older
 * journal's ops never add what version 3 adds, so nothing it holds reads otherwise.
 */
function damagedHeaderVersion(header: Uint8Array | undefined): number {
  if (header === undefined || header.length < JOURNAL_HEADER_BYTES) return JOURNAL_VERSION_OBJECT_BINDINGS;
  const version = new DataView(header.buffer, header.byteOffset, JOURNAL_HEADER_BYTES).getUint32(8, true);
  return version === JOURNAL_VERSION_ONE_BINDING || version === JOURNAL_VERSION || version === JOURNAL_VERSION_OBJECT_BINDINGS ? version : JOURNAL_VERSION_OBJECT_BINDINGS;
}
