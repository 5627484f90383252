import type { StagedBlob, StorageBackend, JournalFile } from './backend.js';
import { checkBlobPayload } from './check-blob-payload.js';
import { callHook } from './call-hook.js';
import { checkMoveFrom } from './check-move-from.js';
import { entryToRepair, storedBlobMatches } from './check-repair-payload.js';
import { checkCallItems } from './check-call-items.js';
import { checkAliasOptions, checkGcOptions, checkItemFields, checkReadBlobOptions, checkVerifyOptions } from './check-options.js';
import { bindingRuleOf, type BindingsPerFile } from './slice-bindings.js';
import { StoreError, isStoreError, toIoError } from './errors.js';
import {
  JOURNAL_HEADER_BYTES,
  JOURNAL_RECORD_HEADER_BYTES,
  bindingsPerFileOfJournal,
  checkJournalHeader,
  encodeJournalHeader,
  encodeJournalRecordList,
  isIntactRecord,
  journalVersionFor,
  scanJournalRecords,
  type JournalScan,
} from './journal-format.js';
import { sameBytes } from './same-bytes.js';
import {
  BLOB_WRITE_CONCURRENCY,
  CLOSE_COMPACT_MANIFEST_DIVISOR,
  CLOSE_COMPACT_MIN_JOURNAL_BYTES,
  COMPACT_MIN_JOURNAL_BYTES,
  JOURNAL_READ_WINDOW_BYTES,
  JOURNAL_VERSION,
  JOURNAL_VERSION_ONE_BINDING,
  JOURNAL_VERSION_OBJECT_BINDINGS,
  MAX_GENERATION,
  MAX_MANIFEST_BYTES,
  MAX_UNCOUNTED_JOURNAL_OPS,
  MAX_JOURNAL_BYTES,
  MAX_JOURNAL_RECORD_BYTES,
  TORN_MIN_ZERO_BYTES,
  TORN_WRITE_SECTOR_BYTES,
} from './limits.js';
import { isNewerPayloadVersion, manifestFormatFor, parseManifest, peekGeneration, serializeManifest, type ManifestHeader } from './manifest-format.js';
import { StateDraft, StoreState, type DroppedBinding, type StoreOp } from './store-state.js';
import type {
  AddEntryInput,
  AddEntryResult,
  AliasSliceItem,
  AliasSlicesOptions,
  CacheEntry,
  DropUnboundEntriesOptions,
  DropUnboundEntriesReport,
  GcOptions,
  GcReport,
  ReadBlobOptions,
  OpenedBlob,
  ReadThroughBlobStats,
  SliceBinding,
  SliceKeyTuple,
  TensorBytesRef,
  UnbindSliceItem,
  VerifyOptions,
  VerifyReport,
} from './types.js';
import { checkUnbindItems, isUnbindable, planUnbind } from './unbind-slices.js';
import { checkDropUnboundOptions, checkNoKeptDamagedManifest, findUnboundEntries, planDropUnbound, reportDrop } from './drop-unbound-entries.js';
import { sliceId, validateSliceKey, withSliceKeys } from './validate-entry.js';
import { collectGarbage } from './collect-garbage.js';
import { checkBlobsDirectoryOwn } from './check-blobs-directory.js';
import { removeFilesLimited } from './remove-files-limited.js';
import { removeAbandonedTempFiles, type TempFilesReport } from './remove-abandoned-temp-files.js';
import { journalFileName } from './fs-backend.js';
import { findIntactRecordAfter, salvageJournalRecords } from './salvage-journal-records.js';
import { findNewerJournal, olderManifestCopyError } from './find-newer-journal.js';
import { verifyEntries } from './verify-entries.js';
import { prepareAddEntry } from './prepare-add-entry.js';
import { estimateManifestGrowthBytes } from './estimate-manifest-growth.js';
import { StoreView, resolveAliasKey } from './store-view.js';
import type { HeldLock } from './write-lock.js';

/** Digits of the longest generation number a manifest can carry (the size estimate allows for it). */
const MAX_GENERATION_DIGITS = String(MAX_GENERATION).length;

/** The cache as one process sees it. Safe to share across concurrent async calls. */
export interface CacheStore {
  readonly root: string;
  /** Manifest generation this instance has loaded (grows with every compaction). */
  readonly generation: number;
  /** Number of entries. */
  readonly size: number;
  /** The builder defaults recorded in the manifest. */
  readonly chunkSize: number;
  readonly coverageMin: number;
  lookup(bytes: Uint8Array, shape: readonly number[], dtype: string): CacheEntry | undefined;
  getEntry(key: string): CacheEntry | undefined;
  lookupBySlice(shardName: string, offsetBytes: number, sizeBytes: number): CacheEntry | undefined;
  /**
   * lookupBySlice with the shard stamps recorded with the binding (SliceKeyTuple), for a caller that
   * checks them. With `stamp` (the stamp of the shard the caller holds): the binding whose stamps
   * hold it, where the slice has several (one per file: FILE-BINDINGS.md), else the latest.
   */
  lookupSliceBinding(shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string | null): SliceBinding | undefined;
  /** Every binding of the slice, latest first (up to MAX_SLICE_BINDINGS; `s3://`: several only where cache.json is format 2). */
  lookupSliceBindings(shardName: string, offsetBytes: number, sizeBytes: number): SliceBinding[];
  /**
   * Whether some slice holds a second binding (one per file): the cache is then manifest format 3 /
   * journal version 2, which releases before 0.56 refuse. A count kept by the slice index: no scan.
   * On `s3://`, what the view holds now (cache.json format 2 only); the format, which stays 2 after
   * an unbind or gc, is the store's `layoutFormat` there.
   */
  readonly holdsSeveralBindings: boolean;
  /**
   * Whether some slice holds a binding without a file stamp (an object's, `etag:"…"`) beside another:
   * the cache is then manifest format 4 / journal version 3, which releases up to 0.57 refuse
   * (FILE-BINDINGS.md phase 3). Always false on `s3://`.
   */
  readonly holdsObjectBindingsBeside: boolean;
  readBlob(key: string, stagingSlot: Uint8Array, options?: ReadBlobOptions): Promise<Uint8Array>;
  /**
   * Confirms, without reading it, that an entry's blob is there with the entry's size (a local
   * cache: an lstat of the file readBlob opens; S3: the object's HEAD, or the inline copy): throws
   * what readBlob would (BLOB_MISSING, BLOB_SIZE_MISMATCH, UNSAFE_BLOB_PATH, ENTRY_NOT_FOUND). A
   * reader that must allocate a buffer of `compBytes` first calls this: a damaged or hostile
   * manifest can claim any size up to the format's bound.
   */
  checkBlob(key: string): Promise<void>;
  /**
   * readBlob with synchronous file system calls (local caches only; absent on object stores): the
   * same checks and errors, without the four thread-pool round trips per blob, which cost far more
   * than reading a small blob from the page cache. It blocks the calling thread for the read: use
   * it for small blobs on local disks.
   */
  readBlobSync?(key: string, stagingSlot: Uint8Array, options?: ReadBlobOptions): Uint8Array;
  /**
   * readBlobSync cut in two, for a read on another thread (local caches only): opens the blob with
   * the same path, link and size checks and returns its descriptor; the caller has the bytes read
   * into `view` (a worker reading `fd`), then calls `finish` for the header and checksum checks.
   */
  openBlobSync?(key: string, stagingSlot: Uint8Array): OpenedBlob;
  /**
   * Forgets what this process keeps of an entry's blob: a host-local copy (object stores with a
   * read-through directory) or a file kept open between synchronous reads (local caches). Called
   * by a reader that read it with `verifyChecksum: false` and found it damaged, so that the next
   * read fetches the object, or opens the file, again instead of reusing the damaged bytes.
   */
  discardLocalCopy?(key: string): Promise<void>;
  /** `s3://` stores with a read-through directory: what it did for blob reads (ReadThroughBlobStats); undefined without one. */
  readThroughStats?(): ReadThroughBlobStats | undefined;
  addEntry(input: AddEntryInput): Promise<AddEntryResult>;
  addEntries(inputs: readonly AddEntryInput[]): Promise<AddEntryResult[]>;
  /**
   * Puts back the blob of an entry found missing or damaged (BLOB_MISSING, BLOB_SIZE_MISMATCH,
   * BLOB_CORRUPT, META_MISMATCH, UNSAFE_BLOB_PATH), from `payload`: exactly the blob the entry
   * describes, else INVALID_ARGUMENT (the encoder is deterministic: re-encoding the tensor with the
   * entry's codebook, chunk size and format version gives it). Written atomically, like any blob;
   * the entry itself does not change. Resolves false, writing nothing, when the stored blob is
   * intact; ENTRY_NOT_FOUND for an unknown key.
   */
  repairBlob(key: string, payload: Uint8Array): Promise<boolean>;
  aliasSlice(keyOrBytes: string | TensorBytesRef, shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string): Promise<boolean>;
  aliasSlices(items: readonly AliasSliceItem[], options?: AliasSlicesOptions): Promise<boolean[]>;
  /**
   * Removes slice bindings (an item with a `key`: only while the slice is bound to that entry);
   * resolves how many were removed. Entries stay, findable by content key, and so do their blobs.
   * A local cache folds the journal into a new manifest without them (a compaction, under the
   * writer lock: no new journal record, so older releases open the cache); an S3 cache deletes the
   * slice's alias objects, lower epochs first, and the removed bindings' stamp objects.
   */
  unbindSlices(items: readonly UnbindSliceItem[]): Promise<number>;
  /**
   * Removes the entries no slice is bound to (not one slice key), and their blobs; resolves what
   * went (DropUnboundEntriesReport). A local cache judges them under the writer lock, caught up (an
   * entry another writer bound meanwhile stays), writes a new manifest generation without them (a
   * compaction, as unbindSlices), and only then unlinks their blobs: a crash in between leaves
   * orphan blobs, which `gc` removes. A handle that still holds the older generation may find such
   * a blob gone (BLOB_MISSING: a reader then reads the tensor raw). `dryRun`: no lock, nothing
   * changed. `s3://` (no writer lock): only with `exclusive: true` (nothing else writes meanwhile;
   * a dry run needs none) and on a cache with no object younger than `minAgeMs`; old unbound entry
   * objects are deleted, slices/ listed again and an entry bound meanwhile put back (a safety net,
   * not a guarantee), then the others' blobs deleted, each looked at first (README "S3 layout",
   * Removing entries).
   */
  dropUnboundEntries(options?: DropUnboundEntriesOptions): Promise<DropUnboundEntriesReport>;
  refresh(): Promise<void>;
  entries(): IterableIterator<CacheEntry>;
  compact(): Promise<void>;
  /**
   * Whether manifest.json lags the cache, as of the last catch-up: journal records not folded into
   * it yet, or a compaction that was interrupted (a full disk at a build's last step). compact()
   * brings it up to date; a writer that stores nothing (a re-run build) checks this to do so.
   */
  readonly needsCompaction: boolean;
  /**
   * Local caches: the damage the last catch-up found in the journal (JOURNAL_INVALID: a damaged
   * header, a damaged record with intact ones after it, a missing journal), which every writer
   * session and gc refuse until recoverDamagedJournal; undefined for a healthy journal (and on
   * `s3://`). A writer with nothing to write takes no lock, so it checks this to refuse as well.
   */
  readonly journalDamage?: StoreError | undefined;
  verify(options?: VerifyOptions): Promise<VerifyReport>;
  gc(options?: GcOptions): Promise<GcReport>;
  /**
   * Local caches: removes the temp files gc would remove (dead writers', and any older than
   * TEMP_FILE_MAX_AGE_MS) and nothing else, under the writer lock, which it takes only when there
   * is one to remove. For a writer cleaning up after a killed one on every run. Absent on `s3://`,
   * whose gc judges unfinished uploads by age (`minAgeMs`).
   */
  removeAbandonedTempFiles?(): Promise<TempFilesReport>;
  /**
   * Local caches: when the journal is damaged (a header that is not this generation's, or a
   * damaged record with intact ones after it: JOURNAL_INVALID, which every writer and gc refuse),
   * moves the cache to a new generation written from what was readable (the manifest and the
   * records before the damage), and renames the damaged journal to `journal.<G>.damaged-<ms>`,
   * kept for inspection (gc lists it under unknownFiles and never removes it). The entries of the
   * unreadable records are gone from the cache (their tensors are served raw until a build adds
   * them again; gc removes their blobs as orphans). Resolves null, changing nothing, when the
   * journal is intact. `splitzip build --repair` calls it.
   */
  recoverDamagedJournal?(): Promise<JournalRecovery | null>;
  close(): Promise<void>;
}

/** What recoverDamagedJournal did. */
export interface JournalRecovery {
  /** The damaged journal's path before, and the name it was kept under (null: it was missing, nothing to keep). */
  journal: string;
  keptAs: string | null;
  /** The generation the cache moved from (the new one is generation + 1). */
  generation: number;
  /** Where the unreadable part began (0: the header itself). */
  damagedFromOffsetBytes: number;
  /** Intact records past the damage whose ops went into the new generation (each op that still applied). */
  salvagedRecords: number;
  /** Records that could not be read (the damaged one, and any other), and ops of salvaged records that no longer applied. */
  droppedRecords: number;
  droppedOps: number;
  /** The damage as reported (JOURNAL_INVALID). */
  reason: string;
}

export interface CacheStoreSettings {
  lockTimeoutMs: number;
  /** OpenCacheStoreOptions.signal: ends waits for the writer lock. */
  signal?: AbortSignal | undefined;
  refreshIntervalMs: number | undefined;
  compactOnClose: boolean | 'when-due';
  /** OpenCacheStoreOptions.sliceBindingsPerFile: this handle's commits may add a slice's binding beside another file's. */
  sliceBindingsPerFile?: boolean | undefined;
}

interface PreparedAdd {
  entry: CacheEntry;
  staged: StagedBlob | undefined;
  /** AddEntryInput.leaveTakenSlices. */
  leaveTakenSlices: boolean;
  /** Set by the commit: the slice keys bound with the entry. */
  slicesBound?: number;
  /** Set by the commit: the bindings adding the entry dropped (AddEntryResult.droppedBindings). */
  droppedBindings?: DroppedBinding[];
}

type CommitRequest =
  | { kind: 'add'; items: PreparedAdd[]; resolve: (added: boolean[]) => void; reject: (error: unknown) => void; dropped?: DroppedBinding[] }
  | {
      kind: 'alias';
      /** Set by the commit: the bindings it dropped (AliasSlicesOptions.onBindingDropped). */
      dropped?: DroppedBinding[];
      /** Set by the commit: the items not applied for AliasSliceItem.besideOnlyIfSeveral (AliasSlicesOptions.onBesideRefused). */
      refused?: DroppedBinding[];
      /** `moveFrom`: AliasSliceItem.moveFrom (undefined with `rebind`, which moves from anything). */
      items: { key: string; slice: SliceKeyTuple; moveFrom: string | undefined; besideOnlyIfSeveral: boolean }[];
      rebind: boolean;
      resolve: (bound: boolean[]) => void;
      reject: (error: unknown) => void;
    };

/** A FIFO mutex for this instance's journal reads and writer sessions. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

async function mapLimited<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const at = next++;
      out[at] = await task(items[at]!);
    }
  });
  await Promise.all(workers);
  return out;
}

function validateSliceArgs(shardName: string, offsetBytes: number, sizeBytes: number, stamp: string | undefined): SliceKeyTuple {
  return validateSliceKey(stamp === undefined ? [shardName, offsetBytes, sizeBytes] : [shardName, offsetBytes, sizeBytes, [stamp]], undefined, 'INVALID_ARGUMENT');
}

/** How long removeAbandonedTempFiles waits for the writer lock: a commit holds it for milliseconds. */
export const SWEEP_LOCK_WAIT_MS = 1000;

/** Catch-up rounds a writer holding the lock may need (seal, reload, finish a compaction): more is a bug. */
const LOCKED_CATCH_UP_ROUNDS = 8;

export class FsCacheStore extends StoreView<ManifestHeader> implements CacheStore {
  private journal: JournalFile | undefined;
  /**
   * Where the last record this handle applied (or appended) starts, and its header (magic, length,
   * CRC). Checked on every catch-up: a failed append cut back after this handle read it, and another
   * record written in its place, would otherwise be read on from the middle of that one.
   */
  private lastRecord: { startOffset: number; header: Uint8Array } | undefined;
  /** Set by a catch-up that found a damaged record with an intact one after it (verify reports it). */
  private damage: StoreError | undefined;
  /**
   * The journal's header is not this generation's (a flipped byte, a file truncated or replaced):
   * none of its records can be trusted as this cache's, so none are read. Readers serve the
   * manifest's entries; writers and gc refuse (damage) until recoverDamagedJournal.
   */
  private journalHeaderDamaged = false;
  /**
   * The journal's version (its header's): 2 once the cache holds a second binding of a slice, and
   * only then may its records add one (FILE-BINDINGS.md); a commit that adds the first one to a
   * cache with a version-1 journal compacts instead (a format-3 manifest, a version-2 journal).
   */
  private journalVersion = JOURNAL_VERSION_ONE_BINDING;
  /** Where the bytes of the last append that failed may end (appendDurably). */
  private failedAppendEnd = 0;
  /** Whether the last compactLocked got as far as writing its seal. */
  private sealAttempted = false;
  /** Set when a failed append could not be cut back off the journal: every later write throws it. */
  private journalUnwritable: StoreError | undefined;
  private journalOffset = JOURNAL_HEADER_BYTES;
  private manifestBytes = 0;
  /**
   * At most how many bytes the journal's applied records add to the manifest a compaction writes
   * (estimateManifestGrowthBytes): kept as records are appended, and for other writers' records,
   * read by catch-up into journalOpsUncounted, counted by the next writer session (a reader only
   * when more than MAX_UNCOUNTED_JOURNAL_OPS are waiting).
   */
  private journalGrowthBytes = 0;
  private journalOpsUncounted: StoreOp[][] = [];
  /** The ops in journalOpsUncounted; above MAX_UNCOUNTED_JOURNAL_OPS they are counted at once. */
  private journalOpsUncountedCount = 0;
  /** Set when the journal ended with a seal the manifest did not reflect yet. */
  private sealSeen = false;
  /** manifestIdentity() of the manifest this instance's state comes from (undefined: unknown). */
  private manifestIdentity: string | undefined;
  private readonly mutex = new Mutex();
  private pendingRefresh: Promise<void> | undefined;
  private queue: CommitRequest[] = [];
  private draining: Promise<void> | undefined;
  private wrote = false;
  private timer: NodeJS.Timeout | undefined;
  /** The generation whose interrupted compaction this writer session's catch-up finished (gc reports it). */
  private compactionFinishedInSession: number | undefined;

  private constructor(
    private readonly backend: StorageBackend,
    private readonly settings: CacheStoreSettings,
  ) {
    super({ generation: 1, chunkSize: 1024, coverageMin: 0.99 });
  }

  /** Loads the cache (manifest + journal). The caller has created it if needed. */
  static async load(backend: StorageBackend, settings: CacheStoreSettings): Promise<FsCacheStore> {
    const store = new FsCacheStore(backend, settings);
    await store.reloadFromDisk();
    try {
      await store.catchUp(undefined);
    } catch (error) {
      await store.journal?.close().catch(() => undefined); // a failed open keeps no descriptor
      throw error;
    }
    if (settings.refreshIntervalMs !== undefined) {
      store.timer = setInterval(() => {
        // Errors surface on the next explicit refresh(); a timer has no caller to tell.
        store.refresh().catch(() => undefined);
      }, settings.refreshIntervalMs);
      store.timer.unref();
    }
    return store;
  }

  get root(): string {
    return this.backend.root;
  }

  get generation(): number {
    return this.header.generation;
  }


  readBlobSync(key: string, stagingSlot: Uint8Array, options?: ReadBlobOptions): Uint8Array {
    checkReadBlobOptions(options, 'readBlobSync');
    const { entry, view } = this.prepareBlobRead(key, stagingSlot);
    const backend = this.backend;
    if (backend.readBlobIntoSync === undefined) throw new StoreError('INVALID_ARGUMENT', 'this store cannot read synchronously', { entry: key });
    backend.readBlobIntoSync(key, entry.blob, view);
    return this.checkReadBlob(entry, view, options);
  }

  /** readBlob's payload checks; a blob that fails them is not read through a kept descriptor again (a repaired file replaces it). */
  private checkReadBlob(entry: CacheEntry, view: Uint8Array, options: ReadBlobOptions | undefined): Uint8Array {
    try {
      checkBlobPayload(entry, view, { checksum: options?.verifyChecksum !== false });
    } catch (error) {
      this.backend.forgetBlob?.(entry.key, entry.blob);
      throw error;
    }
    return view;
  }

  discardLocalCopy(key: string): Promise<void> {
    const entry = this.state.entries.get(key);
    if (entry !== undefined) this.backend.forgetBlob?.(key, entry.blob);
    return Promise.resolve();
  }

  openBlobSync(key: string, stagingSlot: Uint8Array): OpenedBlob {
    const { entry, view } = this.prepareBlobRead(key, stagingSlot);
    const backend = this.backend;
    if (backend.openBlobSync === undefined) throw new StoreError('INVALID_ARGUMENT', 'this store cannot open blobs for another thread', { entry: key });
    const file = backend.openBlobSync(key, entry.blob, view.length);
    return {
      fd: file.fd,
      path: file.path,
      view,
      close: () => file.release(false),
      release: () => file.release(true),
      finish(options?: ReadBlobOptions) {
        try {
          checkReadBlobOptions(options, 'finish');
          checkBlobPayload(entry, view, { checksum: options?.verifyChecksum !== false });
        } catch (error) {
          file.release(false);
          throw error;
        }
        file.release(true);
        return view;
      },
    };
  }

  async checkBlob(key: string): Promise<void> {
    const entry = this.entryToRead(key);
    await this.backend.checkBlob?.(key, entry.blob, entry.compBytes);
  }

  async readBlob(key: string, stagingSlot: Uint8Array, options?: ReadBlobOptions): Promise<Uint8Array> {
    checkReadBlobOptions(options, 'readBlob');
    const { entry, view } = this.prepareBlobRead(key, stagingSlot);
    await this.backend.readBlobInto(key, entry.blob, view);
    return this.checkReadBlob(entry, view, options);
  }

  refresh(): Promise<void> {
    this.assertOpen();
    // Callers arriving while a refresh waits for its turn share it: it has not started reading yet,
    // so it still sees everything committed before each of their calls.
    if (this.pendingRefresh) return this.pendingRefresh;
    const pending = this.mutex.run(() => {
      this.pendingRefresh = undefined;
      return this.catchUp(undefined);
    });
    this.pendingRefresh = pending;
    return pending;
  }

  // ---- loading and catching up --------------------------------------------------------------

  /** Reads manifest.json and its journal from the start, then swaps the state in. */
  private async reloadFromDisk(): Promise<void> {
    const manifestPath = this.backend.describe('manifest.json');
    for (let attempt = 0; ; attempt++) {
      // Before the bytes: a manifest replaced after this stat is seen as a change on the next catch-up.
      const identity = this.backend.manifestIdentity?.();
      const bytes = await this.backend.readManifest();
      if (!bytes) throw new StoreError('NOT_A_CACHE', 'no manifest.json (open with create: true to make a new cache)', { path: manifestPath });
      const parsed = parseManifest(bytes, manifestPath);
      const journal = await this.backend.openJournal(parsed.generation);
      let manifestUnchanged = false;
      if (!journal) {
        // A compaction may have replaced manifest and journal between our two reads: look again.
        const again = await this.backend.readManifest();
        manifestUnchanged = again !== undefined && again !== null && sameBytes(again, bytes);
        if (!manifestUnchanged && attempt < 5) continue;
      }
      let headerDamage: StoreError | undefined;
      // Unread (no journal, or a damaged header): the one a writer makes for this manifest.
      let journalVersion = journalVersionFor(parsed.state);
      if (!journal && manifestUnchanged) {
        // Every journal exists before a manifest names it (a cache's creation, each compaction), so
        // one missing under an unchanged manifest was removed or lost: its records, acknowledged
        // commits, are gone. It read as empty, and gc then removed their blobs as orphans; now the
        // cache opens with its manifest's entries, and writers and gc refuse as for a damaged journal.
        headerDamage = new StoreError(
          'JOURNAL_INVALID',
          `${journalFileName(parsed.generation)}, which the manifest names, is missing: the commits since the manifest was written are lost; writers and gc refuse until the cache moves to a new generation (splitzip build --repair)`,
          { path: this.backend.describe(journalFileName(parsed.generation)), details: { offsetBytes: 0, missing: true } },
        );
      } else if (journal) {
        try {
          const head = await journal.read(0, JOURNAL_HEADER_BYTES);
          journalVersion = checkJournalHeader(head, parsed.generation, journal.path);
        } catch (error) {
          // A header that is not this generation's is damage: the cache opened with its manifest's
          // entries only (it failed to open at all, and no tool could set the journal aside). A
          // journal of a newer format (UNSUPPORTED_FORMAT) or one that cannot be read still fails.
          if (isStoreError(error) && error.code === 'JOURNAL_INVALID') {
            headerDamage = new StoreError(
              'JOURNAL_INVALID',
              `the journal's header is damaged (${error.message}): none of its records are applied; writers and gc refuse until it is set aside (splitzip build --repair)`,
              { path: journal.path, cause: error, details: { offsetBytes: 0 } },
            );
          } else {
            await journal.close();
            throw error;
          }
        }
      }
      const previous = this.journal;
      this.journal = journal;
      this.journalOffset = JOURNAL_HEADER_BYTES;
      this.journalGrowthBytes = 0;
      this.journalOpsUncounted = [];
      this.journalOpsUncountedCount = 0;
      this.state = parsed.state;
      this.header = { generation: parsed.generation, chunkSize: parsed.chunkSize, coverageMin: parsed.coverageMin };
      this.manifestBytes = bytes.length;
      this.manifestIdentity = identity;
      this.sealSeen = false;
      this.damage = headerDamage;
      this.journalHeaderDamaged = headerDamage !== undefined;
      this.journalVersion = journalVersion;
      this.lastRecord = undefined;
      await previous?.close();
      return;
    }
  }

  /**
   * Applies the journal records past our offset. With a writer lock held (`lock` given), also
   * truncates a torn tail, creates a missing journal and finishes an interrupted compaction.
   * Runs under this.mutex.
   */
  private async catchUp(lock: HeldLock | undefined, tolerateDamage = false): Promise<void> {
    // Another manifest file than the one loaded: the cache was deleted and built again (its journal
    // is not the one this instance holds open), or another writer compacted. Reload either way; a
    // cache with no manifest at all (deleted, not rebuilt yet) keeps what it has.
    // `reloaded`: a manifest was read during this call. Without the lock, once that manifest's journal
    // is applied to its end or its seal, every commit made before this call is in: a later commit
    // went to a newer generation, made after that read. Chasing on would only add freshness, and
    // under back-to-back compactions it need never end.
    let reloaded = false;
    const reload = async (): Promise<void> => {
      await this.reloadFromDisk();
      reloaded = true;
    };
    const identity = this.backend.manifestIdentity?.();
    if (identity !== undefined && this.manifestIdentity !== undefined && identity !== this.manifestIdentity) await reload();
    const deadline = Date.now() + this.settings.lockTimeoutMs;
    for (let round = 0; ; round++) {
      // Each round past the first follows a compaction or a writer's step. Under the lock nobody else
      // compacts, so a few rounds always do. Without it, only a journal compacted away between each
      // manifest read and journal open, round after round, keeps us here: contention, retryable.
      if (round >= LOCKED_CATCH_UP_ROUNDS) {
        if (lock) throw new StoreError('JOURNAL_INVALID', 'the journal kept changing generation under the writer lock', { path: this.root });
        if (Date.now() > deadline) {
          throw new StoreError('LOCK_TIMEOUT', `the cache was compacted ${round} times while this handle caught up; retry`, {
            path: this.root,
            details: { rounds: round, timeoutMs: this.settings.lockTimeoutMs },
          });
        }
      }
      // The last record this handle applied must still be where it read it (also a seal: one cut
      // back after a failed sync, trusted, made this handle finish a compaction from a state that
      // lacked later commits, and remove the journal that held them).
      if (this.journal !== undefined && this.lastRecord !== undefined && !this.lastRecordStillThere(this.journal)) {
        await reload();
        continue;
      }
      if (this.sealSeen) {
        if (!lock && reloaded) return;
        const bytes = await this.backend.readManifest();
        const generation = bytes ? peekGeneration(bytes) : undefined;
        if (generation !== undefined && generation > this.header.generation) {
          await reload();
          continue;
        }
        if (!lock) return; // The compacting writer is between steps (or crashed): look again later.
        this.compactionFinishedInSession = this.header.generation;
        await this.finishCompaction();
        continue;
      }
      if (!this.journal) {
        // Missing under this manifest (reloadFromDisk): readers go on with the manifest; a writer
        // stops unless it is the one moving the cache to a new generation.
        if (this.journalHeaderDamaged) {
          if (lock && !tolerateDamage) throw this.damage!;
          return;
        }
        if (!lock) {
          // Absent journal: a compaction raced our open, or the cache was just created. Look again.
          const bytes = await this.backend.readManifest();
          const generation = bytes ? peekGeneration(bytes) : undefined;
          if (generation !== undefined && generation !== this.header.generation) {
            await reload();
            continue;
          }
          this.journal = await this.backend.openJournal(this.header.generation);
          if (!this.journal) return;
          // Made since the manifest was read, by a writer of this manifest: nothing applied yet.
          this.journalVersion = journalVersionFor(this.state);
        } else {
          this.journalVersion = journalVersionFor(this.state);
          await this.backend.createJournal(this.header.generation, encodeJournalHeader(this.header.generation, this.journalVersion));
          this.journal = await this.backend.openJournal(this.header.generation);
          if (!this.journal) throw new StoreError('IO_ERROR', 'the journal vanished right after it was created', { path: this.root });
          this.journalOffset = JOURNAL_HEADER_BYTES;
          continue;
        }
      }
      if (this.journalHeaderDamaged) {
        // Nothing in it is read (see journalHeaderDamaged); a writer stops here unless it is the
        // one setting the journal aside.
        if (lock && !tolerateDamage) throw this.damage!;
        return;
      }
      const journal = this.journal;
      const size = await journal.size();
      if (size < this.journalOffset) {
        // Not the journal we applied any more: replaced, or a failed append cut back after we read
        // it (appendDurably). The files on disk are the truth.
        await reload();
        continue;
      }
      if (size - this.journalOffset > MAX_JOURNAL_BYTES) {
        throw new StoreError('SIZE_INVALID', `journal tail of ${size - this.journalOffset} bytes is above MAX_JOURNAL_BYTES`, {
          path: journal.path,
          details: { tailBytes: size - this.journalOffset, limit: MAX_JOURNAL_BYTES },
        });
      }
      if (size > this.journalOffset) {
        // Window by window, never the whole tail at once: memory stays at JOURNAL_READ_WINDOW_BYTES
        // (or one record, at most MAX_JOURNAL_RECORD_BYTES) whatever size the file claims.
        let stop: JournalScan['stop'] = 'end';
        let recordBytes = 0;
        // A record whose CRC holds over ops that are not valid (or do not apply): damage at its offset.
        let invalidOps: { offsetBytes: number; error: unknown } | undefined;
        while (this.journalOffset < size && !this.sealSeen) {
          const start = this.journalOffset;
          const length = Math.min(size - start, Math.max(JOURNAL_READ_WINDOW_BYTES, recordBytes));
          const bytes = await journal.read(start, length);
          const scan = scanJournalRecords(bytes, start, journal.path, { keepInvalidContent: true });
          if (scan.invalidContent !== undefined && isNewerPayloadVersion(scan.invalidContent.error)) throw scan.invalidContent.error;
          invalidOps = scan.invalidContent;
          for (const record of scan.records) {
            const seal = record.ops.find((op) => op.kind === 'seal');
            const ops = record.ops.filter((op) => op.kind !== 'seal');
            if (ops.length > 0) {
              try {
                this.state.applyOps(ops, { source: 'journal', path: journal.path }, bindingsPerFileOfJournal(this.journalVersion));
              } catch (error) {
                // All or nothing (applyOps checks a draft first): this record is not applied.
                if (!(error instanceof StoreError)) throw error;
                invalidOps = { offsetBytes: this.journalOffset, error };
                break;
              }
              this.journalOpsUncounted.push(ops);
              this.journalOpsUncountedCount += ops.length;
              // A reader that never writes would keep every op of other writers until a reload.
              if (this.journalOpsUncountedCount > MAX_UNCOUNTED_JOURNAL_OPS) this.countJournalGrowth();
            }
            const at = this.journalOffset - start;
            this.lastRecord = { startOffset: this.journalOffset, header: bytes.slice(at, at + JOURNAL_RECORD_HEADER_BYTES) };
            this.journalOffset = record.endOffset;
            if (seal) {
              this.sealSeen = true;
              break;
            }
          }
          stop = invalidOps === undefined ? scan.stop : 'invalid';
          // The file ended early (it shrank meanwhile), or the scan stopped at an invalid record, or at
          // one the file ends inside of: a torn tail. Only a record the window cut is read on.
          if (bytes.length < length || stop === 'invalid' || (stop === 'incomplete' && start + length >= size)) break;
          recordBytes = scan.nextRecordBytes ?? 0;
        }
        this.damage = undefined;
        if (invalidOps !== undefined) {
          // Not a torn tail (its CRC holds), so never cut; before 2026-12-07 its error was thrown
          // from every open, and no tool, `build --repair` included, could set it aside (fuzz probe:
          // an alias of a missing entry, an unsafe blob path, a wrong size, 100,000 stamps, deeply
          // nested MessagePack). Now it is damage like a record that fails its CRC.
          const cause = invalidOps.error;
          const code = cause instanceof StoreError ? cause.code : 'JOURNAL_INVALID';
          const reason = cause instanceof StoreError ? cause.reason : String((cause as Error)?.message ?? cause);
          const damage = new StoreError(
            'JOURNAL_INVALID',
            `the record at offset ${invalidOps.offsetBytes} has a valid CRC but its operations are not valid (${code}: ${reason}). ` +
              'Its commits and the later ones are not applied; writers and gc refuse (recoverDamagedJournal, which splitzip build --repair calls, sets the journal aside and keeps every record and operation that still applies)',
            { path: journal.path, cause, details: { offsetBytes: invalidOps.offsetBytes, reason: 'invalid-ops', opCode: code, ...bindingRuleOf(cause, 'opReason') } },
          );
          if (lock && !tolerateDamage) throw damage;
          this.damage = damage;
          return;
        }
        if (lock && !reloaded && !this.sealSeen && stop !== 'end') {
          // Before anything is cut: scanned from the journal's header under the lock, not from an
          // offset this handle reached without it.
          await reload();
          continue;
        }
        if (!this.sealSeen && stop !== 'end') {
          // A crashed writer's torn record is the last thing in the file: a writer appends only after
          // the record before is durable. An intact record after the bad one means damage (a flipped
          // bit, a bad sector): cutting it off, as a torn tail is, lost every later commit, and gc then
          // removed their blobs as orphans. Readers go on with what comes before (the rest is served
          // raw); writers and gc refuse, and verify reports it.
          const intactAt = await findIntactRecordAfter(journal, this.journalOffset, size);
          // A tail that is whole but fails its CRC, and whose end is not zero-filled from a sector
          // boundary as an interrupted write leaves it, is damage too: cut as a torn tail, a flipped
          // bit in the last record silently dropped acknowledged commits, and gc their blobs.
          const tailDamaged = intactAt === undefined && !(await isTornWriteShape(journal, this.journalOffset, size, stop));
          if (intactAt !== undefined || tailDamaged) {
            const why =
              intactAt !== undefined
                ? `an intact record follows at ${intactAt}`
                : `it is the last thing in the file, whole (its CRC holds over the bytes there, or none of it reads as zeros: what an interrupted write leaves of a sector it never wrote)`;
            const damage = new StoreError(
              'JOURNAL_INVALID',
              `the record at offset ${this.journalOffset} is damaged, and ${why}: not a crashed writer's torn tail. ` +
                'Its commits and the later ones are not applied; writers and gc refuse to cut the journal (recoverDamagedJournal, which splitzip build --repair calls, sets it aside and keeps the commits before it)',
              { path: journal.path, details: { offsetBytes: this.journalOffset, ...(intactAt !== undefined ? { intactRecordOffset: intactAt } : { tailBytes: size - this.journalOffset }) } },
            );
            if (lock && !tolerateDamage) throw damage;
            this.damage = damage;
          } else if (lock && !((journal.linkCount?.() ?? 1) > 1)) {
            // Under the lock nobody is writing: an invalid or incomplete tail is a crashed writer's
            // torn record. (Not in a journal with another name: its other cache's writer, under a
            // lock of its own, may be appending; this cache leaves that file next: privatizeSharedJournal.)
            await journal.truncate(this.journalOffset);
          }
        }
        if (this.sealSeen) continue;
      }
      return;
    }
  }

  /**
   * Whether the last record this handle applied is still in its journal as it was read: the same
   * 12-byte header (magic, length, CRC) at its offset (a file cut before it reads short, which
   * differs too). A record cut back after a failed append, and another written in its place, would
   * otherwise be read on from the middle of the new one (and cut there, under the lock, as a torn
   * tail). One small read on the calling thread; catchUp's size check covers a cut after the record.
   */
  private lastRecordStillThere(journal: JournalFile): boolean {
    const last = this.lastRecord!;
    return sameBytes(journal.peek(last.startOffset, JOURNAL_RECORD_HEADER_BYTES), last.header);
  }

  // ---- writing ------------------------------------------------------------------------------

  /** Runs `task` holding this instance's mutex and the cross-process writer lock, caught up. */
  /**
   * `lockTimeoutMs`: the wait for the lock (the settings' by default). `recovering`: the session of
   * recoverDamagedJournal, whose catch-up goes on past a damaged journal (every other writer
   * refuses it) and which leaves a shared journal as it is (its task reads that journal to salvage
   * it, and moves the cache to a new generation of its own anyway).
   */
  private async writerSession<T>(
    task: (lock: HeldLock) => Promise<T>,
    {
      lockTimeoutMs = this.settings.lockTimeoutMs,
      recovering = false,
      operation = 'writing to the cache',
      anyBlobsDirectory = false,
    }: { lockTimeoutMs?: number; recovering?: boolean; operation?: string; anyBlobsDirectory?: boolean } = {},
  ): Promise<T> {
    return this.mutex.run(async () => {
      // Before the catch-up, which would apply the record that could not be taken back.
      if (this.journalUnwritable) throw this.journalUnwritable;
      // No writer through a blobs/ that is another cache's (check-blobs-directory.ts); the root
      // sweep alone goes on (it leaves blobs/ alone there).
      if (!anyBlobsDirectory) await checkBlobsDirectoryOwn(this.backend, operation);
      const lock = await this.backend.acquireWriteLock(lockTimeoutMs, this.settings.signal);
      this.compactionFinishedInSession = undefined;
      let result: T;
      try {
        await this.catchUp(lock, recovering);
        if (!recovering) await this.privatizeSharedJournal();
        result = await task(lock);
      } catch (error) {
        await lock.release().catch(() => undefined);
        throw error;
      }
      // The task's work is durable: a lock file that cannot be removed now does not undo it (the
      // lock is marked abandoned, and this process's next writer session breaks it at once).
      await lock.release().catch(() => undefined);
      return result;
    });
  }

  /**
   * Writer lock held, caught up: a journal with another name (a hard-linked copy of the cache, `cp
   * -al`, or a snapshot tool's) is left to that other name, and this cache moves to a new
   * generation written from this handle's state (a fresh journal, then the manifest, then this
   * name of the old journal unlinked), before anything is appended: both caches' writers appended
   * to the one file, each under its own lock, and each cache read the other's records (entries
   * whose blobs are in the other directory). No seal goes into the shared file (the other cache
   * reads it): the manifest's rename is the one step that moves this cache off it, and other
   * handles of this cache see the new manifest and reload. A crash before that rename leaves the
   * link count as it was, and the next writer session does it again.
   */
  private async privatizeSharedJournal(): Promise<void> {
    const journal = this.journal;
    if (journal?.linkCount === undefined || journal.linkCount() <= 1) return;
    if (this.header.generation + 1 > MAX_GENERATION) throw new StoreError('SIZE_INVALID', 'manifest generation would exceed MAX_GENERATION', { path: this.root });
    await this.finishCompaction();
  }

  private enqueue(request: CommitRequest): void {
    this.queue.push(request);
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  /** Group commit: every request queued until the writer lock is ours goes into the same record. */
  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      let batch: CommitRequest[] = [];
      try {
        const outcomes = await this.writerSession(
          () => {
            batch = this.queue.splice(0);
            return this.commitBatch(batch);
          },
          { operation: 'a commit (addEntries, aliasSlices)' },
        );
        outcomes.forEach((outcome, i) => {
          const request = batch[i]!;
          if (outcome instanceof Error) request.reject(outcome);
          else request.resolve(outcome);
        });
      } catch (error) {
        for (const request of batch.length > 0 ? batch : this.queue.splice(0)) request.reject(error);
      }
    }
  }

  private async commitBatch(batch: CommitRequest[]): Promise<(boolean[] | Error)[]> {
    const draft = new StateDraft(this.state);
    const outcomes: (boolean[] | Error)[] = [];
    const context = { source: 'this call', path: this.root };
    // A handle with one binding per file binds beside others by a file stamp or an object stamp (phase 3).
    const perFile = this.settings.sliceBindingsPerFile === true ? 'objects' : false;
    // At most the manifest a compaction would write now: the manifest's bytes, and what the
    // journal's records add (their JSON text, an upper bound), until a compaction makes it exact.
    const journalGrowth = this.countJournalGrowth();
    // The manifest a compaction writes carries a later generation, whose number may have more
    // digits (9 -> 10): the estimate allows for the longest one.
    let manifestEstimate = this.manifestBytes + MAX_GENERATION_DIGITS + journalGrowth;
    let estimateExact = journalGrowth === 0 && !this.sealSeen;
    // A compaction near the limit that failed before its seal: the later requests that need one fail with its error.
    let foldError: unknown;
    let batchGrowth = 0;
    for (const request of batch) {
      const fork = draft.fork();
      try {
        let outcome: boolean[];
        if (request.kind === 'add') {
          outcome = request.items.map((item) => {
            const entry = item.leaveTakenSlices ? withoutTakenSlices(item.entry, fork, perFile) : item.entry;
            const droppedBefore = fork.dropped.length;
            const added = fork.planAdd(entry, context, perFile);
            // Without the slices whose new binding ranked least recent past MAX_SLICE_BINDINGS (planAdd).
            item.slicesBound = added ? (fork.getEntry(entry.key)?.sliceKeys.length ?? entry.sliceKeys.length) : entry.sliceKeys.length;
            item.droppedBindings = fork.dropped.slice(droppedBefore);
            return added;
          });
        } else {
          // A conditional item (moveFrom, besideOnlyIfSeveral) is decided here, against the state caught up under the lock.
          const refused: DroppedBinding[] = [];
          outcome = request.items.map((item) => {
            // Planned on a draft of its own: dropped, planning nothing, where it would add the cache's
            // first second binding. Not where this commit adds one already (an earlier item of this
            // call, or an earlier call folded into this commit, bound beside): the batch is one
            // format-3 compaction then, and the item moves the format no further.
            const severalHeld = this.state.holdsSecondBindings || draft.addsSecondBinding || fork.addsSecondBinding;
            // Likewise an object's binding beside another: only where the cache holds one (format 4) or this commit adds one.
            const objectsHeld = this.state.holdsObjectBindingsBeside || draft.addsObjectBindingBeside || fork.addsObjectBindingBeside;
            const own = item.besideOnlyIfSeveral && !(severalHeld && objectsHeld) ? fork.fork() : fork;
            const plan = own.planAlias(item.key, item.slice, request.rebind, context, item.moveFrom, perFile);
            if (own !== fork) {
              if ((own.addsSecondBinding && !severalHeld) || (own.addsObjectBindingBeside && !objectsHeld)) {
                refused.push({ slice: Object.freeze([item.slice[0], item.slice[1], item.slice[2]] as const) as SliceKeyTuple, key: item.key });
                return false;
              }
              fork.absorb(own);
            }
            return plan !== 'absent' && plan !== 'taken' && plan !== 'outranked';
          });
          request.refused = refused;
        }
        const growth = estimateManifestGrowthBytes(fork.ops);
        // (A request that adds nothing, growth 0, is never refused nor made to wait for a fold.)
        if (growth > 0 && manifestEstimate + growth > MAX_MANIFEST_BYTES && !estimateExact) {
          // Near the limit: fold the journal and judge by the manifest's own size. A fold that fails
          // before its seal (SIZE_INVALID: the journal's entries were already too many, a full disk)
          // fails this request only, journal untouched; once the seal was tried, nothing may be
          // appended (readers stop at a seal): the whole batch ends, unjournalled, and the next
          // session finishes the fold.
          if (foldError !== undefined) throw foldError;
          try {
            await this.compactLocked();
          } catch (error) {
            if (this.sealAttempted) throw new BatchAbort(error);
            foldError = error;
            throw error;
          }
          estimateExact = true;
          manifestEstimate = this.manifestBytes + MAX_GENERATION_DIGITS + batchGrowth;
        }
        if (growth > 0 && manifestEstimate + growth > MAX_MANIFEST_BYTES) throw commitTooLarge(request.kind, manifestEstimate + growth, request.items);
        manifestEstimate += growth;
        batchGrowth += growth;
        outcomes.push(outcome);
        request.dropped = fork.dropped;
        draft.absorb(fork);
      } catch (error) {
        if (error instanceof BatchAbort) throw error.cause;
        outcomes.push(error instanceof Error ? error : new Error(String(error)));
      }
    }
    if (draft.ops.length > 0) {
      // Each added entry's own blob: the one of the item whose planAdd added it. Two requests of a
      // batch may add one key with different payloads (another chunk size or codebook), and a
      // request may have failed as a whole (SLICE_CONFLICT): a map of every item's blob by key
      // published the last one's under the first one's entry (BLOB_SIZE_MISMATCH on every read).
      const staged = new Map<string, StagedBlob>();
      batch.forEach((request, at) => {
        const outcome = outcomes[at];
        if (request.kind !== 'add' || !Array.isArray(outcome)) return;
        request.items.forEach((item, i) => {
          if (outcome[i] === true && item.staged) staged.set(item.entry.key, item.staged);
        });
      });
      const toPublish: StagedBlob[] = [];
      for (const op of draft.ops) {
        if (op.kind !== 'add') continue;
        const blob = staged.get(op.key);
        if (!blob) throw new StoreError('IO_ERROR', 'internal: an added entry has no staged blob', { entry: op.key });
        toPublish.push(blob);
      }
      // Durable content under temp names; the renames happen only here, under the lock, for keys
      // nobody committed, so a committed blob is never replaced. One directory sync for all of them.
      await mapLimited(toPublish, BLOB_WRITE_CONCURRENCY, (blob) => this.backend.publishStagedBlob(blob));
      if (toPublish.length > 0) await this.backend.syncBlobNames();
      if ((draft.addsSecondBinding && this.journalVersion < JOURNAL_VERSION) || (draft.addsObjectBindingBeside && this.journalVersion < JOURNAL_VERSION_OBJECT_BINDINGS)) {
        // The cache's first second binding: a version-1 journal (which 0.55.0 reads) cannot hold it,
        // so this commit is a compaction to a format-3 manifest with a version-2 journal after it.
        // Until the manifest is in place nothing changed: a crash leaves the old one (sealed), and
        // the commit was never acknowledged.
        // (Also the first object binding beside another: a version-2 journal cannot hold it; format 4.)
        const next = StoreState.fromEntries(this.state.entries.values(), context, this.state.bindingLevel);
        next.applyChecked(draft.ops, perFile);
        await this.compactLocked(0, next);
        this.wrote = true;
        return outcomes;
      }
      await this.appendOps(draft.ops, batchGrowth, perFile);
      this.wrote = true;
      if (this.journalOffset > Math.max(COMPACT_MIN_JOURNAL_BYTES, this.manifestBytes / 2)) {
        // The batch is committed (journalled, durable): a compaction that fails now (a full disk)
        // must not fail it. Whatever the compaction left is finished by the next writer session.
        await this.compactLocked().catch(() => undefined);
      }
    }
    return outcomes;
  }

  /**
   * The journal's journalGrowthBytes, with the records catch-up applied since counted now: O(new
   * ops), under the writer lock (readers, which never need it, pay nothing).
   */
  private countJournalGrowth(): number {
    for (const ops of this.journalOpsUncounted) this.journalGrowthBytes += estimateManifestGrowthBytes(ops);
    this.journalOpsUncounted = [];
    this.journalOpsUncountedCount = 0;
    return this.journalGrowthBytes;
  }

  /** Appends ops (adding at most `growthBytes` to the manifest, planned at `level`) as records at the end of the valid journal, durably, then applies them. */
  private async appendOps(ops: StoreOp[], growthBytes: number, level: BindingsPerFile): Promise<void> {
    const journal = this.journal;
    if (!journal) throw new StoreError('IO_ERROR', 'internal: no journal under the writer lock', { path: this.root });
    const records = encodeJournalRecordList(ops);
    let appended: number;
    try {
      appended = await this.appendDurably(journal, records, { cutBack: false });
    } catch (error) {
      // What may be in the file: up to the failed record's end, or less (a disk that filled part
      // way); under the lock the file's size is as far as any reader can have read.
      const failedEnd = Math.min(this.failedAppendEnd, await journal.size().catch(() => this.failedAppendEnd));
      // Nothing of it reached the file (a journal this process may not open for writing: NOT_WRITABLE):
      // nothing to take back. A cut-back or fence would fail the same way and end this handle's writes.
      if (failedEnd === this.journalOffset) throw error;
      if (failedEnd - this.journalOffset < records[0]!.length) {
        // Not even the first record is whole: no reader can have applied any of it (length, CRC), so
        // cutting it back is enough, and needs no space (a full disk, the commonest failure).
        const cut = await journal.truncate(this.journalOffset).then(
          () => true,
          () => false,
        );
        if (cut) throw error;
      }
      await this.fenceFailedAppend(journal, failedEnd);
      throw error;
    }
    this.state.applyChecked(ops, level);
    this.journalOffset += appended;
    this.journalGrowthBytes += growthBytes;
  }

  /**
   * After an append that failed (its write or datasync), with the writer lock held: its bytes may be
   * in the file (in the page cache; Linux marks pages whose writeback failed clean, so they may never
   * reach the disk), and a reader that refreshed meanwhile may have applied them and moved past
   * them. Left there, the next catch-up applied the failed commit and the next commit went after
   * it: a crash that lost the failed record then cut every later commit with it. Cut back alone,
   * another record written in its place was read from its middle by such a reader.
   * So the cache moves to the next generation, with the seal written where the failed commit began
   * and zeros over the rest of it: no one appends after a seal, every reader stops there, and a reader
   * whose last record lay in that range sees it changed and reloads. If the seal cannot be written,
   * the failed bytes are cut back (appendDurably); if that fails too, or the move failed before its
   * seal, this handle writes nothing more (IO_ERROR on every write until reopened).
   */
  private async fenceFailedAppend(journal: JournalFile, failedEndOffset: number): Promise<void> {
    if (this.journalUnwritable) return;
    try {
      await this.compactLocked(failedEndOffset);
      return;
    } catch (moveError) {
      if (this.journalUnwritable || this.sealSeen) return; // poisoned by the seal's cut-back, or sealed: the next session finishes the move
      let reason = 'a failed journal append was taken back, but the cache could not move to a new generation';
      if (!this.sealAttempted) {
        // The move failed before its seal (the next journal could not be made): cut the bytes back now.
        try {
          await journal.truncate(this.journalOffset);
        } catch {
          reason = 'a failed journal append could not be taken back, nor the cache moved to a new generation';
        }
      }
      this.journalUnwritable = new StoreError('IO_ERROR', `${reason}: this handle writes nothing more (reopen the store once the disk is healthy)`, {
        path: journal.path,
        details: { offsetBytes: this.journalOffset },
        cause: moveError,
      });
    }
  }

  /**
   * Appends records at the end of the valid journal, each made durable before the next (a crash then
   * tears the last only). On a failure `failedAppendEnd` is where the bytes that may have been written
   * end; with `cutBack` they are cut off again (a failed cut makes this handle stop writing).
   */
  private async appendDurably(journal: JournalFile, records: readonly Uint8Array[], options: { cutBack: boolean }): Promise<number> {
    if (this.journalUnwritable) throw this.journalUnwritable;
    let appended = 0;
    try {
      for (const record of records) {
        this.failedAppendEnd = this.journalOffset + appended + record.length;
        await journal.append(this.journalOffset + appended, record);
        this.lastRecord = { startOffset: this.journalOffset + appended, header: record.slice(0, JOURNAL_RECORD_HEADER_BYTES) };
        appended += record.length;
      }
      return appended;
    } catch (error) {
      this.lastRecord = undefined; // set again by the next catch-up or append
      if (options.cutBack) {
        try {
          await journal.truncate(this.journalOffset);
        } catch (cause) {
          this.journalUnwritable ??= new StoreError(
            'IO_ERROR',
            'a failed journal append could not be taken back: this handle writes nothing more (reopen the store once the disk is healthy)',
            { path: journal.path, details: { offsetBytes: this.journalOffset }, cause },
          );
        }
      }
      throw error;
    }
  }

  /**
   * Folds the journal into a new manifest generation (writer lock held, state caught up). With
   * `padToOffset` (after a failed append: fenceFailedAppend) the seal is followed by zeros up to it.
   * With `state`, the new manifest holds that state instead of this handle's (unbindSlices: the
   * same entries, fewer bindings), which becomes this handle's once the manifest is in place.
   */
  private async compactLocked(padToOffset = 0, state: StoreState = this.state): Promise<void> {
    this.sealAttempted = false;
    const next = this.header.generation + 1;
    if (next > MAX_GENERATION) throw new StoreError('SIZE_INVALID', 'manifest generation would exceed MAX_GENERATION', { path: this.root });
    // 0. The new manifest's bytes, before anything changes: one the reader would refuse (above
    // MAX_MANIFEST_BYTES) is SIZE_INVALID here, the old manifest and journal untouched. Found after
    // the seal, every later session would retry the fold, and written, the cache never opened again.
    const manifest = serializeManifest(state.entries.values(), { ...this.header, generation: next }, manifestFormatFor(state));
    // 1. The next journal exists before any manifest names it. Fencing a failed append, the seal
    // matters more: a seal without its next journal is an interrupted compaction, which any writer
    // session finishes (finishCompaction makes the journal), and no one ever appends after a seal,
    // so the failed commit's bytes can never be followed, nor rewritten in place.
    // Fencing a failed append, the seal still goes in, and finishCompaction then refuses (the
    // newer journal stays in place for recoverDamagedManifest).
    const refusal = await this.refusalOverNewerJournal();
    if (refusal !== undefined && padToOffset === 0) throw refusal;
    try {
      if (refusal === undefined) await this.backend.createJournal(next, encodeJournalHeader(next, journalVersionFor(state)));
    } catch (error) {
      if (padToOffset === 0) throw error;
    }
    // 2. Seal: a reader positioned in this journal always learns about the new generation.
    this.sealAttempted = true;
    await this.appendSeal(next, padToOffset);
    // From here nothing may be appended to this journal (readers stop at the seal): should the
    // next steps fail (a full disk), this instance's next writer session finishes the compaction
    // first, or reloads the generation another writer finished.
    this.sealSeen = true;
    // 3-4. The new manifest, then the old journal goes.
    // The newer-journal check above is this compaction's (a refusal found fencing a failed append is
    // made here, by finishCompaction's own).
    await this.finishCompaction(state, refusal === undefined, manifest);
  }

  /** The seal record at the end of the valid journal (and zeros after it up to `padToOffset`), durably, or cut back. */
  private async appendSeal(nextGeneration: number, padToOffset: number): Promise<void> {
    const [seal] = encodeJournalRecordList([{ kind: 'seal', nextGeneration }]);
    let bytes = seal!;
    if (padToOffset > this.journalOffset + bytes.length) {
      bytes = new Uint8Array(padToOffset - this.journalOffset);
      bytes.set(seal!);
    }
    await this.appendDurably(this.journal!, [bytes], { cutBack: true });
    this.journalOffset += seal!.length; // readers stop at the seal: the zeros after it are never read
  }

  /**
   * Steps 3-4 of a compaction whose seal is written (also after a crash between the steps), writing
   * `state` (this handle's unless unbindSlices gives one without some bindings).
   */
  private async finishCompaction(state: StoreState = this.state, newerJournalChecked = false, manifest?: Uint8Array): Promise<void> {
    const old = this.header.generation;
    const next = old + 1;
    const header = { ...this.header, generation: next };
    // Before any file changes: a manifest above MAX_MANIFEST_BYTES is SIZE_INVALID with nothing made.
    const bytes = manifest ?? serializeManifest(state.entries.values(), header, manifestFormatFor(state));
    const journalVersion = journalVersionFor(state);
    // After a crash the next journal may be missing or hold a stale header: (re)create it empty.
    const existing = await this.backend.openJournal(next);
    let fresh = false;
    if (existing) {
      try {
        const size = await existing.size();
        const head = await existing.read(0, JOURNAL_HEADER_BYTES);
        // (And its own: a hard-linked copy of the cache may share one left by a compaction.)
        fresh = size === JOURNAL_HEADER_BYTES && sameBytes(head, encodeJournalHeader(next, journalVersion)) && (existing.linkCount?.() ?? 1) <= 1;
      } finally {
        await existing.close();
      }
    }
    const refusal = newerJournalChecked ? undefined : await this.refusalOverNewerJournal();
    if (refusal !== undefined) throw refusal;
    if (!fresh) await this.backend.createJournal(next, encodeJournalHeader(next, journalVersion));
    await this.backend.writeManifest(bytes);
    // The manifest in place is the cache's state now (synchronously swapped: lookups see one or the other).
    this.state = state;
    this.journalVersion = journalVersion;
    // Under the writer lock nobody else replaces it: the file just written is this instance's.
    this.manifestIdentity = this.backend.manifestIdentity?.();
    // The cache is at `next` now, and so is this handle, whatever the steps below do: a handle left
    // on the old journal (a failed unlink or open) appended where no manifest looks, and after a
    // move off a shared journal (no seal in it) nothing told it to reload.
    const previous = this.journal;
    this.journal = undefined;
    this.journalOffset = JOURNAL_HEADER_BYTES;
    this.journalGrowthBytes = 0;
    this.journalOpsUncounted = [];
    this.journalOpsUncountedCount = 0;
    this.lastRecord = undefined;
    this.header = header;
    this.manifestBytes = bytes.length;
    this.sealSeen = false;
    await previous?.close().catch(() => undefined);
    // A name of the old journal left by a failure here is gc's (no manifest names it any more).
    await this.backend.removeJournal(old).catch(() => undefined);
    // Opened again by the next catch-up if this fails (under the lock it is made again: still empty).
    this.journal = await this.backend.openJournal(next);
  }

  /**
   * Before a compaction makes the next journal: a journal newer than the manifest holding commits
   * (findNewerJournal) means the manifest is an older copy put back (by hand, a backup tool), and
   * those commits are only there. A compaction would replace that journal or leave it behind as an
   * old one, and gc would then remove their blobs as orphans (review: keeping it under a second
   * name only delayed the loss to the next gc). So writers refuse to compact, as gc does, until
   * recoverDamagedManifest (`splitzip build --repair`) replays it; their commits stay in this
   * manifest's journal meanwhile.
   */
  private async refusalOverNewerJournal(): Promise<StoreError | undefined> {
    const newer = await findNewerJournal(this.backend, this.header.generation);
    if (newer === undefined) return undefined;
    return olderManifestCopyError(this.backend.describe('manifest.json'), this.header.generation, newer, {
      consequence: 'writers refuse to compact over it; `splitzip build <model> --out <cache> --repair` (recoverDamagedManifest) replays it',
    });
  }

  get needsCompaction(): boolean {
    return this.journalOffset > JOURNAL_HEADER_BYTES || this.sealSeen;
  }

  get journalDamage(): StoreError | undefined {
    return this.damage;
  }

  compact(): Promise<void> {
    this.assertOpen();
    return this.writerSession(async () => {
      if (this.journalOffset > JOURNAL_HEADER_BYTES) await this.compactLocked();
    }, { operation: 'compact' });
  }

  addEntry(input: AddEntryInput): Promise<AddEntryResult> {
    return this.addEntries([input]).then((results) => results[0]!);
  }

  async addEntries(inputs: readonly AddEntryInput[]): Promise<AddEntryResult[]> {
    this.assertOpen();
    checkCallItems(inputs, 'addEntries', 'an AddEntryInput object');
    const prepared = inputs.map((input) => prepareAddEntry(input));
    // See what other processes added, so existing keys cost no blob write and no lock.
    await this.refresh();
    const seen = new Set<string>();
    const work: { at: number; entry: CacheEntry; payload: Uint8Array; onPayloadWritten: (() => void) | undefined }[] = [];
    prepared.forEach(({ entry, payload, onPayloadWritten }, at) => {
      if (this.state.entries.has(entry.key) || seen.has(entry.key)) return;
      seen.add(entry.key);
      work.push({ at, entry, payload, onPayloadWritten });
    });
    const leaveTaken = (at: number): boolean => inputs[at]?.leaveTakenSlices === true;
    const results: AddEntryResult[] = prepared.map(({ entry }) => ({ key: entry.key, added: false, slicesBound: 0 }));
    if (work.length === 0) return results;
    // Before a byte is staged: a blob published through another cache's blobs/ replaces its file of that key.
    await checkBlobsDirectoryOwn(this.backend, 'addEntries');
    const staged: StagedBlob[] = [];
    try {
      await mapLimited(work, BLOB_WRITE_CONCURRENCY, async (item) => {
        staged.push(await this.backend.stageBlob(item.entry.key, item.payload, item.onPayloadWritten));
      });
      const byKey = new Map(staged.map((s) => [s.key, s]));
      const items: PreparedAdd[] = work.map((w) => ({ entry: w.entry, staged: byKey.get(w.entry.key), leaveTakenSlices: leaveTaken(w.at) }));
      const added = await new Promise<boolean[]>((resolve, reject) => {
        this.enqueue({ kind: 'add', items, resolve, reject });
      });
      work.forEach((w, i) => {
        const droppedBindings = added[i] ? items[i]!.droppedBindings : undefined;
        results[w.at] = {
          key: w.entry.key,
          added: added[i]!,
          slicesBound: added[i] ? (items[i]!.slicesBound ?? w.entry.sliceKeys.length) : 0,
          ...(droppedBindings !== undefined && droppedBindings.length > 0 ? { droppedBindings: droppedBindings.map(({ slice, key }) => ({ slice, key })) } : {}),
        };
      });
      return results;
    } finally {
      await Promise.all(staged.map((s) => this.backend.discardStagedBlob(s)));
    }
  }

  async repairBlob(key: string, payload: Uint8Array): Promise<boolean> {
    this.assertOpen();
    await this.refresh();
    const entry = entryToRepair(this.state.entries, key, payload, this.root);
    // A descriptor kept from an earlier read may be of the damaged file: look at the path anew.
    this.backend.forgetBlob?.(key, entry.blob);
    if (await storedBlobMatches(entry, payload, (view) => this.backend.readBlobInto(entry.key, entry.blob, view))) return false;
    // The file there may be another cache's blob of this key in its own encoding, not damage.
    await checkBlobsDirectoryOwn(this.backend, 'repairBlob');
    const staged = await this.backend.stageBlob(key, payload);
    let repaired = entry;
    try {
      // Under the writer lock, as every blob is published (gc never sees it half-way).
      await this.writerSession(async () => {
        // Caught up: an entry removed since the look above (dropUnboundEntries, a rebuilt cache) is
        // unknown as any other key, and gets no blob (it would be an orphan, and the repair a lie).
        repaired = entryToRepair(this.state.entries, key, payload, this.root);
        await this.backend.publishStagedBlob(staged);
        await this.backend.syncBlobNames();
      }, { operation: 'repairBlob' });
    } finally {
      await this.backend.discardStagedBlob(staged);
    }
    this.backend.forgetBlob?.(key, repaired.blob);
    return true;
  }

  aliasSlice(keyOrBytes: string | TensorBytesRef, shardName: string, offsetBytes: number, sizeBytes: number, stamp?: string): Promise<boolean> {
    return this.aliasSlices([{ key: keyOrBytes, shardName, offsetBytes, sizeBytes, ...(stamp === undefined ? {} : { stamp }) }]).then((results) => results[0]!);
  }

  async aliasSlices(items: readonly AliasSliceItem[], options: AliasSlicesOptions = {}): Promise<boolean[]> {
    this.assertOpen();
    checkCallItems(items, 'aliasSlices', 'an AliasSliceItem object ({ key, shardName, offsetBytes, sizeBytes, stamp? })');
    checkAliasOptions(options);
    checkItemFields(items, 'aliasSlices');
    const rebind = options.rebind === true;
    const resolved = items.map((item) => {
      const slice = validateSliceArgs(item.shardName, item.offsetBytes, item.sizeBytes, item.stamp);
      const key = resolveAliasKey(item);
      const moveFrom = checkMoveFrom(item, rebind);
      // A `moveFrom` naming the item's own key (a loader's record: bind if unbound, else only the
      // stamp) is besideOnlyIfSeveral with the field or without (a caller's store wrapped by the
      // runtime): a load never moves the cache to manifest format 3.
      return { key, slice, moveFrom, besideOnlyIfSeveral: item.besideOnlyIfSeveral === true || (moveFrom !== undefined && moveFrom === key) };
    });
    await this.refresh();
    const results = resolved.map(() => false);
    const pending: { at: number; key: string; slice: SliceKeyTuple; moveFrom: string | undefined; besideOnlyIfSeveral: boolean }[] = [];
    const draft = new StateDraft(this.state);
    // An item the draft shows bound to its key by an earlier pending item of this call (the same
    // slice twice) is answered as that item is in the commit: a conditional one may lose there.
    const lastPending = new Map<string, number>();
    const follows: { at: number; pending: number }[] = [];
    resolved.forEach(({ key, slice, moveFrom, besideOnlyIfSeveral }, at) => {
      if (key === undefined) return;
      // Checks here too, so a conflict or size mismatch fails fast without the lock; absent, or a
      // conditional item's slice bound to a third entry ('taken'), → false. The commit decides again.
      const plan = draft.planAlias(key, slice, rebind, { source: 'this call', path: this.root }, moveFrom, this.settings.sliceBindingsPerFile === true ? 'objects' : false);
      const id = sliceId(...slice);
      if (plan === 'already-bound') {
        results[at] = true;
        const earlier = lastPending.get(id);
        if (earlier !== undefined && pending[earlier]!.key === key) follows.push({ at, pending: earlier });
      }
      if (plan === 'bound') {
        lastPending.set(id, pending.length);
        pending.push({ at, key, slice, moveFrom, besideOnlyIfSeveral });
      }
      // Least recent past MAX_SLICE_BINDINGS as of now: the commit decides again under the lock
      // (false and onBindingDropped with this key if still so; journals nothing).
      if (plan === 'outranked') pending.push({ at, key, slice, moveFrom, besideOnlyIfSeveral });
    });
    if (pending.length === 0) return results;
    let dropped: DroppedBinding[] | undefined;
    let refused: DroppedBinding[] | undefined;
    const bound = await new Promise<boolean[]>((resolve, reject) => {
      const request: Extract<CommitRequest, { kind: 'alias' }> = {
        kind: 'alias',
        items: pending.map((p) => ({ key: p.key, slice: p.slice, moveFrom: p.moveFrom, besideOnlyIfSeveral: p.besideOnlyIfSeveral })),
        rebind,
        resolve: (value) => {
          dropped = request.dropped;
          refused = request.refused;
          resolve(value);
        },
        reject,
      };
      this.enqueue(request);
    });
    const onDropped = options.onBindingDropped;
    if (onDropped !== undefined) for (const binding of dropped ?? []) callHook(() => onDropped(binding.slice, binding.key));
    const onRefused = options.onBesideRefused;
    if (onRefused !== undefined) for (const item of refused ?? []) callHook(() => onRefused(item.slice, item.key));
    pending.forEach((p, i) => {
      results[p.at] = bound[i]!;
    });
    for (const { at, pending: earlier } of follows) results[at] = bound[earlier] === true;
    return results;
  }

  /**
   * Bindings go by a compaction that writes the new manifest without them: no journal operation
   * removes one (a new record kind would make every older release refuse the journal). The state
   * without them is swapped in only once that manifest is in place; a crash at any step leaves the
   * old manifest and its journal (sealed or not: the next writer finishes the fold from them, with
   * every binding) or the new manifest, and never loses an entry.
   */
  async unbindSlices(items: readonly UnbindSliceItem[]): Promise<number> {
    this.assertOpen();
    const checked = checkUnbindItems(items);
    await this.refresh();
    if (checked.length === 0) return 0;
    // Nothing bound (as of now): no lock, no new generation. Not with a damaged or missing journal:
    // its unapplied records may bind these slices, and 0 would tell the caller they are unbound; the
    // writer session refuses it, as for a slice bound in the part read (as dropUnboundEntries does).
    if (!checked.some((item) => isUnbindable(this.state, item)) && this.damage === undefined) return 0;
    return this.writerSession(async () => {
      // Caught up under the lock: what other writers bound or rebound meanwhile is judged too.
      const plan = planUnbind(this.state, checked);
      if (plan === undefined) return 0;
      await this.compactLocked(0, plan.state);
      return plan.removed;
    }, { operation: 'unbindSlices' });
  }

  /**
   * Entries go as bindings do (unbindSlices): by a compaction writing the new manifest without
   * them, swapped into this handle once it is in place. Their blobs are unlinked after that, still
   * under the lock (a writer adding the same key again publishes its blob after this session, not
   * before an unlink of it); a crash before the manifest's rename keeps every entry and blob, one
   * after it leaves orphan blobs for gc.
   */
  async dropUnboundEntries(options: DropUnboundEntriesOptions = {}): Promise<DropUnboundEntriesReport> {
    this.assertOpen();
    checkDropUnboundOptions(options);
    await this.refresh();
    // A salvaged manifest's entries lost their bindings: refused before anything is judged unbound.
    await checkNoKeptDamagedManifest(this.backend);
    // Its blobs are unlinked: refused through a blobs/ that is not this cache's own (another cache's may hold the same keys bound).
    await checkBlobsDirectoryOwn(this.backend, options.dryRun === true ? 'dropUnboundEntries (dry run)' : 'dropUnboundEntries');
    if (options.dryRun === true) {
      // What the real drop would say: its writer session refuses a damaged journal.
      if (this.damage) throw this.damage;
      return reportDrop(findUnboundEntries(this.state), true);
    }
    // None unbound (as of now): no lock, no new generation. Not with a damaged journal: the writer
    // session refuses it (judged under the lock), as the dry run does; "none" would be an answer
    // about the part of the cache before the damage.
    if (findUnboundEntries(this.state).length === 0 && this.damage === undefined) return reportDrop([], false);
    return this.writerSession(async () => {
      // Again under the lock: a recovery (which takes it) may have run since the look above.
      await checkNoKeptDamagedManifest(this.backend);
      await checkBlobsDirectoryOwn(this.backend, 'dropUnboundEntries');
      // Caught up under the lock: an entry another writer bound meanwhile is kept.
      const plan = planDropUnbound(this.state);
      if (plan === undefined) return reportDrop([], false);
      await this.compactLocked(0, plan.state);
      // A few at once (an unlink mostly waits on the file system); every one is tried, and a blob
      // whose unlink failed is reported in the entries' order: its entry is gone already, so the
      // blob is an orphan now, gc's to remove.
      const blobs = plan.dropped.map((entry) => ({ dir: 'blobs' as const, name: `${entry.key}.bin`, isFile: true }));
      const failed = await removeFilesLimited(this.backend, blobs, { stopAtFailure: false });
      const blobsLeft = plan.dropped.filter((_, index) => failed[index]).map((entry) => entry.blob);
      return reportDrop(plan.dropped, false, blobsLeft);
    }, { operation: 'dropUnboundEntries' });
  }

  // ---- maintenance --------------------------------------------------------------------------

  async verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    this.assertOpen();
    checkVerifyOptions(options);
    await this.refresh();
    const report = await verifyEntries(this.backend, [...this.state.entries.values()], this.header.generation, options);
    const problems = [...report.problems];
    const damage = this.damage;
    if (damage !== undefined) problems.unshift({ key: '', qualname: damage.path ?? 'journal', code: damage.code, message: damage.message });
    // Commits in a journal newer than the manifest: it is an older copy put back (recoverDamagedManifest).
    const newer = await findNewerJournal(this.backend, this.header.generation);
    if (newer !== undefined) {
      const error = olderManifestCopyError(this.backend.describe('manifest.json'), this.header.generation, newer, {
        consequence: 'those commits are not applied (recoverDamagedManifest, splitzip build --repair, replays them)',
      });
      problems.unshift({ key: '', qualname: this.backend.describe('manifest.json'), code: error.code, message: error.message });
    }
    return problems.length === report.problems.length ? report : { ...report, ok: false, problems };
  }

  gc(options: GcOptions = {}): Promise<GcReport> {
    this.assertOpen();
    checkGcOptions(options);
    if (options.dryRun === true) return this.gcDryRun(options);
    return this.writerSession((lock) => {
      const folded = this.compactionFinishedInSession;
      return collectGarbage(
        this.backend,
        this.state,
        this.header.generation,
        { recoveredLocks: lock.recovered, finishedCompaction: folded === undefined ? undefined : journalFileName(folded), inspectLock: false },
        options,
      );
    }, { operation: 'gc' });
  }

  removeAbandonedTempFiles(): Promise<TempFilesReport> {
    this.assertOpen();
    // A sweep is housekeeping: behind a writer that holds the lock longer than a commit takes, it
    // gives up (LOCK_TIMEOUT) rather than hold up the build that asked (an interrupted or failed
    // build waited out the whole lockTimeoutMs for it), and the files wait for the next run.
    return removeAbandonedTempFiles(this.backend, (task) =>
      this.writerSession(() => task(), { lockTimeoutMs: Math.min(SWEEP_LOCK_WAIT_MS, this.settings.lockTimeoutMs), anyBlobsDirectory: true }),
    );
  }

  recoverDamagedJournal(): Promise<JournalRecovery | null> {
    this.assertOpen();
    // Caught up as far as the journal can be read: the records before the damage are applied.
    return this.writerSession(
      async () => {
        const damage = this.damage;
        if (damage === undefined) return null;
        if (this.header.generation + 1 > MAX_GENERATION) throw new StoreError('SIZE_INVALID', 'manifest generation would exceed MAX_GENERATION', { path: this.root });
        const generation = this.header.generation;
        const journal = this.journal;
        if (!this.backend.keepJournalCopy) throw damage;
        if (journal === undefined) {
          // A missing journal: nothing to salvage or keep; the new generation holds the manifest's entries
          // (serialised by finishCompaction before it makes any file).
          await this.finishCompaction();
          this.damage = undefined;
          this.journalHeaderDamaged = false;
          const path = this.backend.describe(journalFileName(generation));
          return { journal: path, keptAs: null, generation, damagedFromOffsetBytes: 0, salvagedRecords: 0, droppedRecords: 0, droppedOps: 0, reason: damage.message };
        }
        const offset = typeof damage.details.offsetBytes === 'number' ? damage.details.offsetBytes : 0;
        // Every intact record past the damage is salvaged (acknowledged commits: other writers',
        // and those a writer that had read past the damage kept appending), op by op: an op that
        // no longer applies (an alias of an entry added in the damaged record) is left out.
        const salvage = await salvageJournalRecords(journal, offset, this.state, { bindingsPerFile: bindingsPerFileOfJournal(this.journalVersion) });
        // The new manifest's bytes before any file changes: one above MAX_MANIFEST_BYTES is
        // SIZE_INVALID here (each failed attempt kept another copy of the damaged journal, and made the next one).
        const manifest = serializeManifest(this.state.entries.values(), { ...this.header, generation: generation + 1 }, manifestFormatFor(this.state));
        // The damaged file gets its second name first: a crash at any later step leaves it kept
        // (gc would remove a `journal.<G>` no manifest names, and with it the only copy).
        const keptAs = await this.backend.keepJournalCopy(generation, `${journalFileName(generation)}.damaged-${Date.now()}`);
        // The new manifest's rename is the one step that moves the cache off the damaged journal.
        await this.finishCompaction(this.state, false, manifest);
        this.damage = undefined;
        this.journalHeaderDamaged = false;
        return { journal: journal.path, keptAs, generation, damagedFromOffsetBytes: offset, ...salvage, reason: damage.message };
      },
      { recovering: true, operation: 'recoverDamagedJournal' },
    );
  }


  /**
   * gc's report without changing anything on disk: no writer lock (taking it recovers a dead
   * holder's lock, and its catch-up finishes an interrupted compaction), a read-only catch-up, and
   * what a writer session would have done reported instead of done.
   */
  private async gcDryRun(options: GcOptions): Promise<GcReport> {
    await this.refresh();
    // What gc itself would say: it refuses a damaged journal (its records' blobs are not orphans).
    if (this.damage) throw this.damage;
    return this.mutex.run(async () => {
      let unfolded: number | undefined;
      if (this.sealSeen) {
        // A sealed journal whose manifest still names it: a writer session finishes that compaction first.
        const bytes = await this.backend.readManifest();
        if (bytes && peekGeneration(bytes) === this.header.generation) unfolded = this.header.generation;
      }
      return collectGarbage(
        this.backend,
        this.state,
        unfolded === undefined ? this.header.generation : unfolded + 1,
        { recoveredLocks: [], finishedCompaction: unfolded === undefined ? undefined : journalFileName(unfolded), inspectLock: true },
        options,
      );
    });
  }

  /** OpenCacheStoreOptions.compactOnClose for a handle that wrote. */
  private isCompactionDueOnClose(): boolean {
    const policy = this.settings.compactOnClose;
    if (policy !== 'when-due') return policy;
    // A compaction of this handle's that failed after sealing its journal: close finishes it, as always.
    if (this.sealSeen) return true;
    const recordBytes = this.journalOffset - JOURNAL_HEADER_BYTES;
    return recordBytes > Math.max(CLOSE_COMPACT_MIN_JOURNAL_BYTES, this.manifestBytes / CLOSE_COMPACT_MANIFEST_DIVISOR);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.timer) clearInterval(this.timer);
    await this.draining;
    if (this.wrote && this.isCompactionDueOnClose()) {
      try {
        await this.compact();
      } catch (error) {
        this.closed = true;
        this.backend.releaseFiles?.(); // kept blob descriptors too: nothing reads through this handle again
        await this.journal?.close().catch(() => undefined);
        this.journal = undefined;
        throw toIoError(error, 'cannot compact on close', { path: this.root });
      }
    }
    this.closed = true;
    this.backend.releaseFiles?.();
    await this.mutex.run(async () => {
      await this.journal?.close();
      this.journal = undefined;
    });
  }
}

/** A failure that ends a whole commit batch (not one request's outcome). */
class BatchAbort {
  constructor(readonly cause: unknown) {}
}

/** SIZE_INVALID for a request whose commit would take the manifest above MAX_MANIFEST_BYTES. */
function commitTooLarge(kind: 'add' | 'alias', manifestBytes: number, items: readonly ({ entry: CacheEntry } | { key: string })[]): StoreError {
  const keys = items.map((item) => ('entry' in item ? item.entry.key : item.key));
  return new StoreError(
    'SIZE_INVALID',
    `${kind === 'add' ? 'adding' : 'binding'} this would take the manifest to about ${manifestBytes} bytes, above MAX_MANIFEST_BYTES (${MAX_MANIFEST_BYTES}), which no reader opens: refused, nothing stored (unbind slices, or use another cache)`,
    { ...(keys.length === 1 ? { entry: keys[0] } : {}), details: { manifestBytes, limit: MAX_MANIFEST_BYTES } },
  );
}

/** `entry` without the slice keys `state` has bound to another entry (AddEntryInput.leaveTakenSlices). */
function withoutTakenSlices(entry: CacheEntry, state: StateDraft, bindingsPerFile: BindingsPerFile): CacheEntry {
  // With sliceBindingsPerFile a slice bound to other files' entries is not taken: the entry binds it beside them.
  const free = entry.sliceKeys.filter((slice) => state.canBind(entry.key, slice, bindingsPerFile));
  return free.length === entry.sliceKeys.length ? entry : withSliceKeys(entry, free);
}

/**
 * Whether the journal's invalid or incomplete tail [fromOffset, sizeBytes) can be what a crash
 * left of an append. A writer appends one record at a time and makes it durable before the next, so
 * a torn tail is at most one record, and the sectors of it that never reached the disk read as
 * zeros (unwritten extents, new blocks, the old content past the former end of the file), in any
 * order the file system persisted them. So it is torn when it is a prefix of a record (the file
 * ends inside it: a short write) whose bytes do not all hold under its CRC, or when one of its
 * sectors reads as zeros over at least TORN_MIN_ZERO_BYTES (or the whole tail does). Anything
 * else is damage at rest: a flipped bit in a whole record, or in its length field (which made a
 * whole record look cut short: its CRC holds over the bytes there with the true length).
 */
async function isTornWriteShape(journal: JournalFile, fromOffset: number, sizeBytes: number, stop: 'end' | 'incomplete' | 'invalid'): Promise<boolean> {
  const tailBytes = sizeBytes - fromOffset;
  if (tailBytes <= 0) return true;
  if (tailBytes > JOURNAL_RECORD_HEADER_BYTES + MAX_JOURNAL_RECORD_BYTES) return false;
  const tail = await journal.read(fromOffset, tailBytes);
  if (tail.length < tailBytes) return true; // it shrank meanwhile: not judged here
  if (stop === 'incomplete') return !isWholeRecordWithDamagedLength(tail);
  let zeroFrom = tail.length;
  while (zeroFrom > 0 && tail[zeroFrom - 1] === 0) zeroFrom -= 1;
  if (zeroFrom === 0) return true;
  for (let sector = Math.floor(fromOffset / TORN_WRITE_SECTOR_BYTES) * TORN_WRITE_SECTOR_BYTES; sector < sizeBytes; sector += TORN_WRITE_SECTOR_BYTES) {
    const start = Math.max(sector, fromOffset) - fromOffset;
    const end = Math.min(sector + TORN_WRITE_SECTOR_BYTES, sizeBytes) - fromOffset;
    if (end - start >= TORN_MIN_ZERO_BYTES && isAllZero(tail, start, end)) return true;
  }
  return false;
}

/** A record header whose CRC holds over all the bytes after it once its length field says their count. */
function isWholeRecordWithDamagedLength(tail: Uint8Array): boolean {
  if (tail.length <= JOURNAL_RECORD_HEADER_BYTES) return false;
  const record = new Uint8Array(tail); // a copy: the length field is set to what the file holds
  new DataView(record.buffer).setUint32(4, tail.length - JOURNAL_RECORD_HEADER_BYTES, true);
  return isIntactRecord(record);
}

function isAllZero(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (bytes[i] !== 0) return false;
  return true;
}

