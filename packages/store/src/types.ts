import type { CodebookJson } from '@splitzip/codec';

/**
 * A slice identity as `@splitzip/safetensors` reports it: (shardName, offsetBytes, sizeBytes), with
 * the optional stamps of the shard files the binding was verified against (SafetensorsShard.stamp:
 * a file's size, times and inode; several when copies of the
 * file, or another model's file of the same name, hold the same bytes there; the latest
 * MAX_SLICE_STAMPS are kept). A reader whose shard has a stamp not among them knows the file is
 * not one the binding was verified against, and does not trust it.
 */
export type SliceKeyTuple = readonly [shardName: string, offsetBytes: number, sizeBytes: number, stamps?: readonly string[]];

/**
 * A slice's binding: its entry and the shard stamps recorded with it (empty: none recorded). An S3
 * cache gives the bucket's object stamps, then this host's file stamps of the slice and that entry.
 */
export interface SliceBinding {
  entry: CacheEntry;
  stamps: readonly string[];
}

/** The payload header fields a manifest records (camelCase here, snake_case on disk). */
export interface PayloadMetaJson {
  version: number;
  elementCount: number;
  chunkSize: number;
  chunkCount: number;
  escapeCount: number;
  compBytes: number;
  rawBytes: number;
  /** The payload's stored XXH32 (u32). */
  checksum: number;
}

/** One cached tensor. Returned objects are frozen snapshots; a later alias yields a new object. */
export interface CacheEntry {
  readonly key: string;
  readonly qualname: string;
  /** Relative to the cache root; always `blobs/<key>.bin`. */
  readonly blob: string;
  readonly codebook: CodebookJson;
  readonly meta: PayloadMetaJson;
  readonly rawBytes: number;
  readonly compBytes: number;
  readonly dtype: 'BF16';
  readonly shape: readonly number[];
  /** Payload format version (the codec's FORMAT_VERSION). */
  readonly formatVersion: number;
  /** `xxh32:<8 hex>`: the payload's own checksum, which covers every byte of the blob. */
  readonly blobChecksum: string;
  /**
   * SHA-256 of the blob file (hex); null when the writer chose not to record one (AddEntryInput
   * recordBlobSha256: local caches only; the payload's XXH32, `blobChecksum`, still covers every
   * byte). Entries of an S3 cache always have one: their object names carry it.
   */
  readonly blobSha256: string | null;
  /**
   * SHA-256 of the original, uncompressed bytes (hex), when the writer recorded one; null otherwise.
   * The content key (`key`, a SHA-1 of shape, dtype, length and these bytes) identifies the same
   * bytes, and is what `verify({ decode: true })` always checks: builders no longer spend a second
   * pass over every tensor on this one.
   */
  readonly sha256: string | null;
  readonly sliceKeys: readonly SliceKeyTuple[];
}

/**
 * An entry's blob opened for a read on another thread (CacheStore.openBlobSync): a worker reads
 * exactly `view.length` bytes from offset 0 of `fd` into `view` (a view of the staging slot, so a
 * view of shared memory reaches the worker), then this thread calls `finish` (or `close` when the
 * read failed). Both close the file; only the first call of either does anything.
 */
export interface OpenedBlob {
  readonly fd: number;
  /** The blob file, for errors. */
  readonly path: string;
  /** The staging slot's first compBytes bytes: where the read goes. */
  readonly view: Uint8Array;
  /**
   * Makes readBlob's checks on the bytes read into `view` and gives the file back (kept open for
   * the blob's next read when they pass, closed when they fail); returns `view`.
   */
  finish(options?: ReadBlobOptions): Uint8Array;
  /** Gives the file back, closed: the read failed or its bytes were not checked. */
  close(): void;
  /**
   * Gives the file back after a read whose bytes the caller checked itself (header against the
   * manifest, checksum) and found good: it may stay open for the blob's next read.
   */
  release(): void;
}

/** A tensor given by its bytes, for aliasing by content. */
export interface ReadBlobOptions {
  /**
   * false: skip the payload's content checksum because the caller verifies it while decoding (the
   * codec's fused decode + verify, one pass instead of two); the header and its agreement with the
   * manifest are still checked. Default true. A caller that passes false and finds the checksum
   * wrong calls the store's `discardLocalCopy` (the S3 store's read-through copies are then judged
   * by it: a damaged one is dropped and fetched again).
   */
  verifyChecksum?: boolean | undefined;
}

export interface TensorBytesRef {
  bytes: Uint8Array;
  shape: readonly number[];
  dtype: string;
}

export interface AddEntryInput {
  /** The content key (computeContentKey of the original bytes). */
  key: string;
  qualname: string;
  /** The encoded payload (bytes past the header's total_bytes are ignored). */
  payload: Uint8Array;
  shape: readonly number[];
  dtype: 'BF16';
  /**
   * SHA-256 (hex) of the original bytes, to record beside the content key (optional; see
   * CacheEntry.sha256). null is the same as absent, so another store's entry can be passed as is.
   */
  sha256?: string | null;
  /** Slice keys to bind with the entry (same rules as aliasSlices). */
  sliceKeys?: readonly SliceKeyTuple[];
  /**
   * The blob's SHA-256 computed by the caller (e.g. the thread that encoded the payload, while its
   * bytes were at hand), so the store does not hash it again; see PayloadDigest. Without it the
   * store computes it.
   */
  payloadDigest?: PayloadDigest;
  /**
   * false: record no `blob_sha256` unless `payloadDigest` brings one (the store then need not hash
   * the blob; `verify` still checks its XXH32, which covers every byte). The local store only: the
   * S3 store always records it, because its object names carry it. Default true.
   */
  recordBlobSha256?: boolean;
  /**
   * Called once the store will not read `payload` again: its bytes are in the file system (local
   * cache: written to the staged blob file, before its fsync, rename and journal record) or stored
   * (S3). From then on the memory is the caller's again, while the commit completes: a builder
   * reuses it for the next tensor instead of holding it through the fsync. Called at most once, and
   * not at all where the store writes nothing for the entry (its key is cached already) or fails
   * before the payload is written: settling addEntry is what returns the memory then. It must not
   * throw (what it throws is ignored).
   */
  onPayloadWritten?: () => void;
  /**
   * A slice key already bound to another entry by the time the entry commits is left out instead
   * of failing the add with SLICE_CONFLICT (`slicesBound` says how many were bound). For a caller
   * that found its slices free before writing the payload, while another writer may bind one of
   * them meanwhile (two concurrent builds of models sharing shard names): it then decides about
   * that slice itself (aliasSlices, with `rebind` or not), as it would have had it seen the binding.
   */
  leaveTakenSlices?: boolean;
}

/**
 * SHA-256 of a payload's blob bytes (its first compBytes bytes), naming what was hashed: the XXH32
 * checksum and compBytes read from the header of the very bytes hashed. The store validates the
 * payload it is given (header, and its XXH32 over every byte) and accepts the digest only when both
 * fields equal that payload's, so a digest of other bytes (another payload, a stale or shifted
 * range, a truncation) is refused rather than recorded; `verify` re-hashes every blob.
 */
export interface PayloadDigest {
  /** 64 lower-case hex digits. */
  sha256: string;
  /** The header's stored XXH32 (u32) of the bytes hashed. */
  checksum: number;
  /** The header's total payload length of the bytes hashed, which is how many were hashed. */
  compBytes: number;
}

export interface AddEntryResult {
  key: string;
  /** false when the key was already in the cache (no-op). */
  added: boolean;
  /**
   * How many of the input's `sliceKeys` this call bound: all of them with an added entry; for a key
   * already there, none on a directory cache (the caller aliases them), and on S3 those still
   * unbound (bound in the same commit: a writer that lost the race for the entry still binds its slice).
   */
  slicesBound: number;
  /**
   * A handle opened with `sliceBindingsPerFile`: other entries' bindings that binding this entry's
   * slices dropped (past MAX_SLICE_BINDINGS: the least recent); absent when none.
   */
  droppedBindings?: { slice: SliceKeyTuple; key: string }[];
}

export interface AliasSliceItem {
  /** The entry's content key, or the tensor's bytes (its key is computed; non-BF16 → false). */
  key: string | TensorBytesRef;
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /**
   * The stamp of the shard file the caller read the bytes from (SliceKeyTuple): recorded with the
   * binding, and added to its stamps when the slice is bound to this entry already. An S3 cache
   * records object stamps (`etag:<ETag>`, shardStampKind 'object') in the bucket; a file stamp
   * describes one host's file, so it records that as a host stamp: in the store's memory and, with
   * `readThroughDir`, in that per-host directory (README "Host file stamps").
   */
  stamp?: string;
  /**
   * A content key: bind the slice only while it is unbound, bound to `key` already (stamps merge as
   * without it), or bound to this entry, from which it is then moved as `rebind` moves a slice. For
   * a caller that judged a binding to this entry wrong: a binding another writer made since (to any
   * other entry) is left as it is, and the item answers false (no SLICE_CONFLICT; the rest of the
   * batch goes on). A local cache decides it under the writer lock, from the caught-up state; an S3
   * cache from its listing just before the write, and a write that loses a race is taken back
   * (README "S3 layout"). With `options.rebind` it changes nothing: that moves from any entry.
   * On a handle with `sliceBindingsPerFile`, a `moveFrom` naming this file's binding (the one
   * holding the item's file stamp, or the one recording only its inode's file stamps or none: the
   * file before it changed in place) MOVES it (replaces it) even where a binding beside it would be
   * allowed: one op, so the slice never holds both (no format 3, no eviction at MAX_SLICE_BINDINGS).
   * One naming another file's binding (another inode), even the slice's only one, binds beside.
   * An `s3://` store (phase 2) judges a `moveFrom` naming the item's own key (a loader's record) as
   * a plain alias for lower and beside bindings: the stamp recorded with a lower binding of that
   * key (nothing written above the latest), a binding beside other objects' added as without it
   * (besideOnlyIfSeveral applies); a slice with no usable latest bound to another key: false.
   */
  moveFrom?: string | undefined;
  /**
   * On a handle with `sliceBindingsPerFile`: add this binding beside other files' bindings only if,
   * at commit under the writer lock (caught up), the cache holds a second binding of some slice
   * now (holdsSeveralBindings; not the manifest's format, which can stay 3 while none is held), or
   * the commit being made adds one (an earlier item of the call, or another call folded into the
   * same commit, binding beside: it commits as one format-3 compaction); else the item is not
   * applied (answered false, `options.onBesideRefused` called; nothing written for it), so that it
   * never moves a cache to format 3, which releases before 0.56 refuse. For a loader whose view of
   * the cache may be stale.
   * An item that binds no slice beside another entry's (an unbound slice, stamps merged, a move)
   * is applied as without it. An `s3://` store (phase 2 of FILE-BINDINGS.md) applies such an item
   * beside others only where cache.json is format 2 already (read again) or another item of the
   * call moves it there: format 2 is never undone there.
   */
  besideOnlyIfSeveral?: boolean | undefined;
}

/**
 * A slice binding to remove (CacheStore.unbindSlices): the slice key, and optionally the entry it
 * must still be bound to.
 */
export interface UnbindSliceItem {
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /**
   * Remove the binding only while the slice is bound to this entry (content key): a caller that
   * judged the binding it saw leaves alone one that another writer made since (a rebind).
   */
  key?: string | undefined;
}

export interface AliasSlicesOptions {
  /**
   * Move slices already bound to another entry, whichever it is, instead of throwing SLICE_CONFLICT
   * (an item's `moveFrom` then changes nothing).
   */
  rebind?: boolean | undefined;
  /**
   * Called once the commit is durable, for each binding it dropped (a handle opened with
   * `sliceBindingsPerFile`: a slice's least recent binding past MAX_SLICE_BINDINGS, or another
   * entry's binding left without a file stamp once this file's stamp moved to this entry): the slice
   * key (no stamps) and the entry whose binding went, which may now be unbound (dropUnboundEntries).
   * What it throws is ignored.
   */
  onBindingDropped?: ((slice: SliceKeyTuple, key: string) => void) | undefined;
  /**
   * Called once the commit is done, for each item with `besideOnlyIfSeveral` that was not applied
   * because the cache held no second binding then (`s3://`: cache.json was format 1): its slice
   * key (no stamps) and key. What it throws is ignored.
   */
  onBesideRefused?: ((slice: SliceKeyTuple, key: string) => void) | undefined;
}

export interface OpenCacheStoreOptions {
  /** Create the cache (directories, empty manifest) if it does not exist. */
  create?: boolean | undefined;
  /** Recorded in a new manifest (builder default); default 0.99. */
  coverageMin?: number | undefined;
  /** Recorded in a new manifest (builder default); default the codec's DEFAULT_CHUNK_SIZE. */
  chunkSize?: number | undefined;
  /** How long a writer waits for a live holder's lock; default 30 s. */
  lockTimeoutMs?: number | undefined;
  /** Call refresh() on an unref'd timer every this many ms (off by default). */
  refreshIntervalMs?: number | undefined;
  /**
   * Fold the journal into manifest.json on close() if this handle wrote: `true` (the default)
   * always; `'when-due'` only once the journal holds more than max(CLOSE_COMPACT_MIN_JOURNAL_BYTES,
   * the manifest's size / CLOSE_COMPACT_MANIFEST_DIVISOR), as a loader that records a few bindings
   * wants (a compaction rewrites the whole manifest: 1.3 s and 150 MB at 64,000 entries, for one
   * alias); `false` never. Local caches (an `s3://` cache never compacts on close).
   */
  compactOnClose?: boolean | 'when-due' | undefined;
  /**
   * Local caches: ends every wait of this handle for the writer lock (a live holder's: up to
   * `lockTimeoutMs`), which then rejects ABORTED with the signal's reason as its cause (a CLI's
   * Ctrl-C); work under a lock already taken is never cut. `s3://` caches: `s3.signal`.
   */
  signal?: AbortSignal | undefined;
  /** Settings for `s3://bucket/prefix` roots (ignored for directories). */
  s3?: S3StoreOptions | undefined;
  /**
   * Local caches: this handle's aliasSlices and addEntries bind a slice bound to other entries
   * beside them, one binding per file (FILE-BINDINGS.md, phase 1), where they threw SLICE_CONFLICT:
   * when the item's stamp is a file stamp no binding holds and each binding has one. Every handle
   * reads such caches; without this option a handle never adds a second binding. The first one
   * moves the cache to manifest format 3 / journal version 2, which releases before 0.56 refuse
   * (UNSUPPORTED_FORMAT). `s3://`: accepted, changes nothing yet (phase 2). Default false.
   */
  sliceBindingsPerFile?: boolean | undefined;
}

/**
 * An `S3Client` of `@aws-sdk/client-s3`, typed by what the store calls on it. The SDK is an optional
 * peer dependency: naming its type here made these declarations fail to type-check (skipLibCheck
 * off) wherever it is not installed.
 */
export interface S3ClientLike {
  send(command: never, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  destroy(): void;
}

/**
 * Object-store settings. Endpoint, credentials and region default to the AWS SDK's environment
 * variables (AWS_ENDPOINT_URL[_S3], AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION); a custom
 * endpoint switches to path-style addressing.
 */
export interface S3StoreOptions {
  /** A ready `S3Client` (its own endpoint, credentials, retries); the store then adds only its own retries. */
  client?: S3ClientLike | undefined;
  /** Overrides AWS_ENDPOINT_URL(_S3), e.g. `http://127.0.0.1:7480`. */
  endpoint?: string | undefined;
  /** Overrides AWS_REGION; default us-east-1 when neither is set. */
  region?: string | undefined;
  /** Default: true when a custom endpoint is set. */
  forcePathStyle?: boolean | undefined;
  /** With `create: true`, also create the bucket when it does not exist. */
  createBucket?: boolean | undefined;
  /** Requests in flight per store (GETs, PUTs, LISTs together); default 8. Bounds sockets, not memory: reads land in the caller's slots. */
  maxConcurrentRequests?: number | undefined;
  /** A blob bigger than this is read as parallel ranged GETs of this size; default 8 MiB. */
  partSizeBytes?: number | undefined;
  /** Blobs bigger than this are uploaded in parts (multipart upload); default 64 MiB (S3's minimum part is 5 MiB). */
  multipartThresholdBytes?: number | undefined;
  /** Attempts per request on transient errors (reset, refused, 5xx, throttling); default 6. */
  maxAttempts?: number | undefined;
  /** Backoff before the second attempt, doubled each time (with jitter) up to `retryMaxDelayMs`; default 100. */
  retryBaseDelayMs?: number | undefined;
  /** Default 2000. */
  retryMaxDelayMs?: number | undefined;
  /** Socket idle limit of one request; default 30 s. */
  requestTimeoutMs?: number | undefined;
  /**
   * Longest one attempt of a request may take, start to end (a server trickling bytes is never idle
   * for `requestTimeoutMs`); an attempt past it is retried like a reset connection. Default 300 s
   * (DEFAULT_REQUEST_DEADLINE_MS).
   */
  requestDeadlineMs?: number | undefined;
  /**
   * Aborts every request of the store in flight and every backoff wait: they fail with ABORTED
   * (its `cause` the signal's reason), and no request starts after (a CLI's Ctrl-C, a server's
   * shutdown). Open the store again for more work.
   */
  signal?: AbortSignal | undefined;
  /** TCP connect limit; default 3 s. */
  connectTimeoutMs?: number | undefined;
  /** A per-host directory of fetched blobs and, for `openS3ObjectSource`, raw object ranges (read-through): checked before use, written atomically. */
  readThroughDir?: string | undefined;
}

export interface VerifyProblem {
  key: string;
  qualname: string;
  code: string;
  message: string;
  /** Set where the code alone does not say it: `'dangling-binding'` (s3://, ENTRY_NOT_FOUND: a slice bound at its top epoch to a key with no entry object). */
  reason?: string;
}

export interface VerifyProgress {
  done: number;
  total: number;
  key: string;
}

export interface VerifyOptions {
  /** Also decode every blob and check the result against the content key (and the entry's `sha256`, when it has one). */
  decode?: boolean | undefined;
  onProgress?: ((progress: VerifyProgress) => void) | undefined;
  /** Checked before each entry: once aborted, verify rejects with the signal's reason (a long verify stops at Ctrl-C). */
  signal?: AbortSignal | undefined;
}

export interface VerifyReport {
  ok: boolean;
  /** Entries checked. */
  checked: number;
  passed: number;
  /** Entries fully decoded and compared with their original digest. */
  decoded: number;
  bytesRead: number;
  problems: VerifyProblem[];
  generation: number;
  durationMs: number;
}

/** CacheStore.dropUnboundEntries' options. */
export interface DropUnboundEntriesOptions {
  /**
   * Report the entries that would go without changing anything: no writer lock, judged from a
   * read-only catch-up (a writer may bind one of them before a real drop, which then keeps it).
   */
  dryRun?: boolean | undefined;
  /**
   * S3 only: an entry object is removed only when older than this (a writer's addEntries PUTs its
   * entry object before its aliases, and a younger unbound one may be between the two); default 1
   * hour, at least MIN_S3_GC_AGE_MS, as for gc. A local cache judges under its writer lock: ignored
   * (but checked: a non-negative number). Until 2026-12-07 an S3 drop also refused a cache with any
   * object this young (`recent-writes`); its intent objects make it safe beside writers now.
   */
  minAgeMs?: number | undefined;
  /**
   * Accepted for compatibility, no effect (must be a boolean): an S3 drop required it until
   * 2026-12-07 (the caller's word that nothing else wrote to the cache); its intent objects make it
   * safe beside builds, loaders, gc and other drops now (README "S3 layout", Removing entries). A
   * local cache takes its writer lock.
   */
  exclusive?: boolean | undefined;
}

/** An entry dropUnboundEntries removed (or in a dry run would remove). */
export interface DroppedEntry {
  key: string;
  qualname: string;
  /** Its blob's size: what removing it reclaims. */
  compBytes: number;
}

/** What dropUnboundEntries did. */
export interface DropUnboundEntriesReport {
  dryRun: boolean;
  /** How many entries went (would go): `entries.length`. */
  count: number;
  entries: DroppedEntry[];
  /** Their blobs' sizes together. */
  reclaimedBytes: number;
  /**
   * Blob files of removed entries that could not be unlinked after the new manifest was in place
   * (relative paths): orphans now, which `gc` removes. Empty in a dry run.
   */
  blobsLeft: string[];
  /**
   * `s3://` only, present when not empty: blobs (relative names) found missing under entries the
   * drop would have put back for a writer's binding (a drop paused past DROP_INTENT_STALE_MS, whose
   * intent a resolver judged meanwhile): the entry is not put back (the slice is read raw; a build
   * binds it again).
   */
  blobsMissing?: string[];
  /**
   * `s3://` only, present when not empty: entry objects the drop would have put back for a
   * writer's binding whose conditional PUT was refused (a 409) every time with the entry still
   * absent: not put back yet; their intents stay, a later gc or drop puts them back.
   */
  restoreConflicts?: string[];
  /**
   * `s3://` only, a real run, present when not empty: killed drops' intent objects this drop resolved
   * first (DROP_INTENT_STALE_MS old), as gc's `staleDropIntents`; `staleDropResolution` what that did.
   */
  staleDropIntents?: string[];
  /** `s3://` only: as gc's `staleDropResolution`, for the intents this drop resolved first. */
  staleDropResolution?: StaleDropResolution;
  /**
   * `s3://` only, present when the drop stopped early (the rest of its candidates left for a later
   * drop): why, and the entry objects it had deleted, unbound, whose intents it left to the resolver
   * (a later gc or drop, once DROP_INTENT_STALE_MS old, deletes their blobs or puts them back).
   */
  stopped?: DropStopped;
}

/**
 * Why an `s3://` drop stopped early: its own intent object gone ('intent-gone': a resolver took it),
 * DROP_INTENT_STALE_MS/2 old ('intent-old'), or that long since its batch began ('paused').
 */
export type DropStopReason = 'intent-gone' | 'intent-old' | 'paused';

export interface DropStopped {
  reason: DropStopReason;
  /** Entry objects deleted by the drop, not put back, their intents left to the resolver (sorted). */
  leftToResolver: string[];
}

export interface GcOptions {
  /**
   * Report what would be removed without changing anything on disk: run without the writer lock,
   * from a read-only catch-up (a dead holder's lock is reported in staleLocks, not recovered; an
   * interrupted compaction is reported in finishedCompaction, not finished).
   */
  dryRun?: boolean | undefined;
  /**
   * S3 only: an orphan blob, an unfinished multipart upload or an orphan stamp object is removed
   * only when older than this (a writer may be between its blob PUT and its entry PUT, or its alias
   * and stamp PUTs may be newer than gc's listing); default 1 hour.
   */
  minAgeMs?: number | undefined;
}

export interface GcReport {
  dryRun: boolean;
  /** Blob files no entry references (relative paths). */
  orphanBlobs: string[];
  orphanBytes: number;
  /** Temp files left by dead processes (relative paths). */
  tempFiles: string[];
  /**
   * Local caches: temp files gc keeps because their writer may still be writing them (relative
   * paths): a live pid of this pid space, a pid of another (a container or host sharing the
   * directory), or a name without a pid space tag (releases before 2026-12-05), which only age can
   * judge; each goes once TEMP_FILE_MAX_AGE_MS old. Listed, a dry run included, so that a killed
   * older build's staged blobs (GBs on big models) are not invisible for a day. Absent for S3 caches.
   */
  keptTempFiles?: string[];
  /** The size of keptTempFiles together, in bytes. */
  keptTempBytes?: number;
  /** Journals of other generations. */
  oldJournals: string[];
  /** Stale lock files and break markers of dead holders, including one recovered to run gc (a dry run: one it would recover). */
  staleLocks: string[];
  /**
   * Local caches: the journal whose interrupted compaction (sealed, manifest not yet replaced) gc
   * finished before looking, or in a dry run would finish; also listed in oldJournals. Absent when none.
   */
  finishedCompaction?: string;
  /** Files in the cache that this package did not write (reported, never removed). */
  unknownFiles: string[];
  /**
   * S3 caches: stamp objects (relative names) no reader takes, older than minAgeMs: those of a
   * binding that is gone (the slice is bound to another key, or the key's entry object is gone), and
   * those beyond a binding's newest MAX_SLICE_STAMPS; removed (a dry run: would be). Absent for
   * local caches, whose stamps live in the journal with their bindings.
   */
  orphanStamps?: string[];
  /**
   * S3 caches: alias objects (relative names) below their slice's top epoch whose key has no entry
   * object (an entry dropUnboundEntries removed), older than minAgeMs: they bind nothing, and would
   * bind that key again should the objects above them go; removed (a dry run: would be). Absent for
   * local caches.
   */
  orphanAliases?: string[];
  /**
   * S3 caches: what gc left because it was younger than minAgeMs (a writer may still be between its
   * blob and entry PUTs, an upload may still be running, a binding may still be being written), so
   * that a dry run shows what a later gc may take: counts of what would otherwise be in orphanBlobs
   * (and their bytes), tempFiles, orphanStamps and orphanAliases, as of the listing; a real run adds
   * those it listed as old enough but found written again when it looked just before deleting.
   * Absent for local caches.
   */
  keptYoung?: GcKeptYoung;
  /**
   * S3 caches: orphan blobs kept because a dropUnboundEntries run's intent object names their entry
   * (that drop may still put the entry back; a later gc removes a real orphan). Absent for local caches.
   */
  keptUnderDrop?: number;
  /**
   * S3 caches: intent objects of killed drops (DROP_INTENT_STALE_MS old) resolved (a dry run: would
   * be): each entry put back if bound since, else its blob removed as an orphan, then the intent.
   */
  staleDropIntents?: string[];
  /**
   * S3 caches, a real run: what resolving those intents did, present when it put back, deleted or
   * found missing anything, or failed (since 2026-12-07; before, only `staleDropIntents`).
   */
  staleDropResolution?: StaleDropResolution;
  durationMs: number;
}

/** What resolving killed drops' intent objects did (S3 caches: gc's and dropUnboundEntries' reports). */
export interface StaleDropResolution {
  /** Entry objects put back (bound since their drop judged them). */
  restored: string[];
  /** Blob objects deleted (their entry unbound, absent, under no other intent). */
  blobsDeleted: string[];
  /** Entry objects bound whose blob was missing: not put back (the slice is read raw; a build binds it again). */
  blobsMissing: string[];
  /**
   * Damaged intent objects: a body that is not a drop intent (`splitzip-drop-intent/1`), or a bound
   * entry's bytes that fail an entry object's checks. Never put back; resolved by their name (since
   * 2026-12-07; before, they stayed for good with their blob): the entry present or unbound as any
   * intent (the blob rule), bound with the entry absent in `entriesLost`; then deleted. Present when
   * not empty.
   */
  intentsInvalid?: string[];
  /**
   * Entry objects of damaged intents whose key is bound and whose entry object is absent: nothing
   * valid to put back; the intent is deleted, verify reports the dangling binding, readers serve
   * the slice raw and a build stores the tensor again. Present when not empty.
   */
  entriesLost?: string[];
  /**
   * Bound entry objects whose put back was refused (a 409) every time with the entry still absent:
   * not put back; their intents stay for the next resolver. Present when not empty.
   */
  restoreConflicts?: string[];
  /**
   * The first failure, when resolving some intent failed (or the listing did): those intents stay
   * for the next resolver; the rest of gc's or the drop's work is still reported.
   */
  error?: { code: string; message: string };
}

/** GcReport.keptYoung: counts of what an S3 gc kept as younger than minAgeMs. */
export interface GcKeptYoung {
  orphanBlobs: number;
  orphanBytes: number;
  tempFiles: number;
  orphanStamps: number;
  orphanAliases: number;
}

/**
 * What an `s3://` store's read-through directory did for its blob reads (CacheStore.readThroughStats):
 * a full disk or an unwritable directory never fails a read, and is seen here instead.
 */
export interface ReadThroughBlobStats {
  /**
   * Reads served from a local copy that passed the store's checks (with `verifyChecksum: false` the
   * payload checksum is left to the caller: a copy it then finds damaged counts here and in `damaged`).
   */
  hits: number;
  /** Reads that found no usable local copy (absent, another size, unreadable). */
  misses: number;
  /** Local copies that failed the store's checks, or the caller's (`discardLocalCopy`): removed and fetched again. */
  damaged: number;
  /** Copies written after a fetch. */
  written: number;
  /** Copies that could not be written (full disk, read-only or removed directory): the reads went on. */
  writeFailures: number;
}
