import { FORMAT_VERSION, MAX_ELEMENT_COUNT, READABLE_FORMAT_VERSIONS, computePayloadLayout, MIN_CHUNK_SIZE } from '@splitzip/codec';

/**
 * The newest manifest format this package reads and writes (1 was the seed's Python manifest; see
 * README): 3 lets a slice hold several bindings, one per file (FILE-BINDINGS.md). A cache is written
 * as MANIFEST_FORMAT_ONE_BINDING until it first holds a second binding of some slice, so releases
 * that know only format 2 (0.55.0 and before) keep reading caches that never need more.
 */
export const MANIFEST_FORMAT = 3;
/**
 * The manifest format of a cache some slice of which holds a binding without a file stamp (an
 * object's, `etag:"…"`) beside another (FILE-BINDINGS.md phase 3): releases up to 0.57 refuse it
 * (UNSUPPORTED_FORMAT), which would read such a binding as damage in format 3.
 */
export const MANIFEST_FORMAT_OBJECT_BINDINGS = 4;
/** The manifest format of a cache whose every slice has at most one binding (byte-compatible with 0.55.0). */
export const MANIFEST_FORMAT_ONE_BINDING = 2;
/** Payload format versions whose blobs this package serves (the codec's). */
export const PAYLOAD_FORMAT_VERSION = FORMAT_VERSION;
/** Payload versions an entry may record (the codec reads all of them). */
export const READABLE_PAYLOAD_VERSIONS: readonly number[] = READABLE_FORMAT_VERSIONS;
/**
 * The newest journal file format version (the u32 after the magic): 2 is written after a format-3
 * manifest, and its alias ops may add a slice's second binding (one per file); a format-2 manifest's
 * journal stays JOURNAL_VERSION_ONE_BINDING, readable by 0.55.0.
 */
export const JOURNAL_VERSION = 2;
/** The journal version written after a MANIFEST_FORMAT_ONE_BINDING manifest. */
export const JOURNAL_VERSION_ONE_BINDING = 1;
/** The journal version written after a MANIFEST_FORMAT_OBJECT_BINDINGS manifest: its ops may add an object's binding beside others. */
export const JOURNAL_VERSION_OBJECT_BINDINGS = 3;
/**
 * The highest journal version read as a newer release's format (UNSUPPORTED_FORMAT); above it the
 * header is damaged (JOURNAL_INVALID, recoverable): versions go up one at a time, a release that
 * writes a newer journal writes a newer manifest format too (which older releases refuse first:
 * "Mixing releases"). One flipped bit of a version written (1, 2, 3) never gives 4: it gives 0 or
 * one above 4 (5, 6, 7, 9, 10, 11, …), damage; or another version this release reads: 1 or 2 → 3 is
 * read as version 3, whose ops are a superset (an intact version-1 or -2 record applies as written),
 * and 3 → 1 or 2 makes its records' bindings beyond that version's rule damage (JOURNAL_INVALID);
 * the header's generation and each record's CRC still hold, so neither is told from the real one.
 */
export const MAX_NEWER_JOURNAL_VERSION = JOURNAL_VERSION_OBJECT_BINDINGS + 1;

/** About 1 KB per entry: room for ~500k entries, far above any model; also below V8's ~2^29-character string limit, so JSON.parse can take it. */
export const MAX_MANIFEST_BYTES = 2 ** 29 - 2 ** 20;
/**
 * Other writers' journal ops a handle keeps, uncounted, for the estimate of the manifest a
 * compaction would write (counted when it next writes, so readers skip the work): above this they
 * are counted at once. Before, a long-lived reader (a runtime refreshing while builds run) kept
 * every op until the next compaction, up to a journal's worth of objects.
 */
export const MAX_UNCOUNTED_JOURNAL_OPS = 4096;
/** One record holds a byte-bounded group of operations (see JOURNAL_RECORD_TARGET_BYTES); far above that. */
export const MAX_JOURNAL_RECORD_BYTES = 64 * 2 ** 20;
/** Records are packed up to this size before a new record starts. */
export const JOURNAL_RECORD_TARGET_BYTES = 8 * 2 ** 20;
/**
 * Compaction keeps a journal near max(COMPACT_MIN_JOURNAL_BYTES, manifest / 2), at most ~256 MiB
 * with a MAX_MANIFEST_BYTES manifest, plus the last commit: 1 GiB leaves room for a large commit;
 * a tail this big did not come from us. Replay reads it in JOURNAL_READ_WINDOW_BYTES windows, so
 * this bounds the time of a replay, not its memory (4 GiB before: a zero tail of 2 GiB crashed Node).
 */
export const MAX_JOURNAL_BYTES = 2 ** 30;
/**
 * Journal replay reads the tail in windows of this size (a record that does not fit is read alone,
 * at most MAX_JOURNAL_RECORD_BYTES): memory stays bounded whatever size the file claims.
 */
export const JOURNAL_READ_WINDOW_BYTES = 8 * 2 ** 20;
/**
 * The unit in which a crash can leave a write unwritten (a disk sector): a torn journal append reads
 * as zeros from a multiple of this to its end (isTornWriteShape). 512 B, the smallest sector, so a
 * torn write on a 4 KiB-sector disk qualifies as well.
 */
export const TORN_WRITE_SECTOR_BYTES = 512;
/**
 * The fewest zero bytes a sector's share of a journal's bad tail must be to count as never written
 * (isTornWriteShape): a record's own bytes hold short zero runs (a msgpack uint32 such as
 * `ce 02 00 00 00`), and bit rot in a record whose natural zeros fill its share of its last sector
 * was cut as a torn write. 16: msgpack ops hold no 16 zero bytes in a row.
 */
export const TORN_MIN_ZERO_BYTES = 16;
/** Compact when the journal exceeds max(this, manifest size / 2): amortised linear manifest writes. */
export const COMPACT_MIN_JOURNAL_BYTES = 4 * 2 ** 20;
/**
 * A handle opened with `compactOnClose: 'when-due'` compacts on close once its journal exceeds
 * max(this, manifest size / CLOSE_COMPACT_MANIFEST_DIVISOR). Replaying a record at open costs about
 * what parsing an entry does (~35 us each, both measured at 64,000 entries), so a journal of a
 * sixteenth of the manifest adds about a sixteenth to every open; below 64 KiB (a few hundred
 * bindings) the replay is a millisecond or two, less than any rewrite of the manifest.
 */
export const CLOSE_COMPACT_MIN_JOURNAL_BYTES = 64 * 2 ** 10;
/** See CLOSE_COMPACT_MIN_JOURNAL_BYTES. */
export const CLOSE_COMPACT_MANIFEST_DIVISOR = 16;
/** Bounds memory spent on a hostile manifest. */
export const MAX_ENTRIES = 10_000_000;
/**
 * Fewer bytes than any entry the store writes takes in a manifest (its blob path alone is 57, with
 * codebook, meta, digests and names ~350): salvageManifest refuses bytes holding more entry starts
 * than this size allows (a hostile file of 10M empty entries ran it out of memory).
 */
export const MIN_ENTRY_TEXT_BYTES = 256;
/** PyTorch's own limit on tensor dimensions. */
export const MAX_SHAPE_RANK = 64;
/** Names, not data. */
export const MAX_QUALNAME_CHARS = 4096;
export const MAX_SHARD_NAME_CHARS = 4096;
/** A shard stamp is a size and a modification time (SliceKeyTuple): a few dozen characters. */
export const MAX_SLICE_STAMP_CHARS = 256;
/**
 * Stamps kept per binding (mergeSliceStamps: object stamps first, then the files changed most
 * recently): copies of a model, or models sharing a shard name, each add one. A format limit: 0.55
 * and 0.56 readers refuse a binding with more.
 */
export const MAX_SLICE_STAMPS = 16;
/**
 * Object stamps that rank ahead of a binding's file stamps past MAX_SLICE_STAMPS (mergeSliceStamps:
 * the most recently recorded; older ones rank below every file stamp). Ahead, because an object's
 * miss re-reads the tensor from S3; capped, because an ETag holds no time: 15 versions read once and
 * never again kept their slots for good, and 4 local files loaded in turn pushed each other out on
 * every load. Half the slots: files keep 8 at least. Below MAX_SLICE_STAMPS, so the best file stamp
 * always ranks within the kept ones (never the last of a kind).
 */
export const MAX_OBJECT_STAMPS_AHEAD = 8;
/**
 * A host-stamp file (host-file-stamps.ts) holds one shard name's records: ~100 bytes a record with
 * one stamp, ~4.5 KB with MAX_SLICE_STAMPS of them. 8 MiB is a shard of ~80k tensors with a stamp
 * each, or ~1,800 with every stamp slot full, far above real shards (a shard name like
 * `model.safetensors` shared by many models adds up: the writer drops the least recently recorded
 * records to stay below). Checked before a byte is read: the file is read synchronously, whole.
 */
export const MAX_HOST_STAMP_FILE_BYTES = 8 * 2 ** 20;
/**
 * Bindings one slice may hold (one per file: revisions or fine-tunes of a model sharing its shard
 * names, FILE-BINDINGS.md). 8 keeps a handful of revisions side by side while bounding what a
 * lookup by stamp scans and what one slice costs in memory; binding a ninth drops the least recent.
 */
export const MAX_SLICE_BINDINGS = 8;
/** A tensor is bound to a handful of slices (tied weights, copies of a checkpoint); 4096 is generous. */
export const MAX_SLICE_KEYS_PER_ENTRY = 4096;
/** Offsets must stay exact in a JS number. */
export const MAX_SLICE_OFFSET_BYTES = Number.MAX_SAFE_INTEGER;
/** The codec caps a payload at MAX_ELEMENT_COUNT BF16 values. */
export const MAX_RAW_BYTES = 2 * MAX_ELEMENT_COUNT;
/** The largest valid payload: every value an escape at the smallest chunk size. */
export const MAX_BLOB_BYTES = computePayloadLayout(MAX_ELEMENT_COUNT, MAX_ELEMENT_COUNT, MIN_CHUNK_SIZE).totalBytes;
/** The largest typed array this Node.js can allocate (Node 20: 4 GiB), the safetensors adapter's limit: verify reports a blob above it instead of failing to allocate. */
export { MAX_BUFFER_BYTES } from '@splitzip/safetensors';
/** Generations count compactions; the journal header stores a u32. */
export const MAX_GENERATION = 2 ** 32 - 1;

/**
 * No single read or write is issued for more than this: Node rejects a length above 2^31 - 1
 * (ERR_OUT_OF_RANGE) and aborts the process on an async FileHandle.read of 2^31 bytes or more
 * (an int32 assertion), so blobs of 2-4 GiB and long journal tails are read and written in pieces.
 */
export const MAX_IO_PIECE_BYTES = 2 ** 30;

/** Longest text of an untrusted string quoted in an error message (describe-value.ts): enough to recognise it. */
export const MAX_QUOTED_VALUE_CHARS = 80;

/**
 * The longest refreshIntervalMs: Node's timer limit (2^31 - 1 ms, ~24.8 days). Above it
 * setInterval fires every millisecond instead (with a TimeoutOverflowWarning on stderr).
 */
export const MAX_REFRESH_INTERVAL_MS = 2 ** 31 - 1;
/** Default writer-lock wait before LOCK_TIMEOUT: commits hold it for milliseconds. */
export const DEFAULT_LOCK_TIMEOUT_MS = 30_000;
/** Break-lock recursion depth (each level needs one more crash during recovery); a dead marker at the deepest level is moved aside and removed. */
export const MAX_LOCK_BREAK_DEPTH = 4;
/**
 * A holder record is ~200 bytes of JSON (a hostname is at most 255 characters): a lock file is read
 * up to this much, and a larger one, not ours, counts as unparseable instead of being read whole.
 */
export const MAX_LOCK_FILE_BYTES = 4096;
/** Linux's PID_MAX_LIMIT (2^22): no pid is larger, so a lock naming one is not a holder record. */
export const MAX_PID = 2 ** 22;
/** A lock file we cannot parse (power loss, tampering) counts as stale after this long. */
export const UNPARSEABLE_LOCK_STALE_MS = 10_000;
/** gc removes a temp file of a live (or foreign-host) pid only after this long. */
export const TEMP_FILE_MAX_AGE_MS = 24 * 3600_000;

/**
 * A lock attempt's temp file younger than this is never swept when the lock is taken, whatever its
 * pid says: it exists for the milliseconds between its write and its link, so only a killed
 * attempt's outlives this, and a pid space misjudged (no /proc/self/ns/pid: two containers of one
 * host name and boot) cannot remove a live attempt's. Also how long an empty one (opened, its record
 * not yet written) names its pid as a cache's creator (mark-cache-being-created.ts): an older one is
 * a killed attempt's, and a new process given its pid read as that creator for good.
 */
export const LOCK_TEMP_MIN_AGE_MS = 60_000;
/**
 * How long an open that finds an empty directory (no manifest, no lock, nothing) waits before
 * looking once more for a creator: a cache's creator makes the directory and then, at once, writes
 * its lock attempt (open-cache-store.ts), two system calls apart; an empty directory is otherwise
 * no cache, and its NOT_A_CACHE comes this much later.
 */
export const EMPTY_CACHE_DIR_LOOK_AGAIN_MS = 100;
/** Concurrent blob writes of one addEntries call. */
export const BLOB_WRITE_CONCURRENCY = 4;
/**
 * Files a directory cache's dropUnboundEntries and gc unlink at once (remove-files-limited.ts). An
 * unlink is a thread-pool round trip that waits on the file system with the CPU idle: one at a time,
 * the drop of 4,000 entries spent ~250 µs a blob (BENCHMARKS.md), and 16 in flight unlinked 16,000
 * flushed files in 0.8–1.3 s against 2.3 s one by one. More only queue behind libuv's threads.
 */
export const MAX_CONCURRENT_UNLINKS = 16;

/**
 * The share of the process's descriptor limit the store's kept blob descriptors (open-blob-files.ts)
 * may take: the rest is for what needs a descriptor to work at all (a model holds one per shard for
 * its life, the journal, the lock). At a fixed limit of 1024 (systemd's LimitNOFILE, docker
 * --ulimit), an 800-shard model beside 256 kept blobs left nothing: every later open failed EMFILE.
 */
export const KEPT_BLOB_FILES_DESCRIPTOR_SHARE = 1 / 8;
/** The fewest blob descriptors kept, however low the limit or often descriptors ran out: below this, keeping saves nothing. */
export const MIN_KEPT_BLOB_FILES = 8;

/**
 * verify reads a blob up to this size whole (as a read does); a larger version-3 payload is read and
 * checked a checksum segment (2^20 values) at a time (verify-blob-in-pieces.ts), so verify holds at
 * most about this much of a blob whatever the tensor's size: a 4 GiB tensor's ~3 GiB payload was
 * read whole. 8 MiB: the whole read of a blob this small costs nothing worth saving.
 */
export const VERIFY_WHOLE_BLOB_MAX_BYTES = 8 * 2 ** 20;
/**
 * No read of verify's piecewise check asks for more than this: a segment's sm span (2^20 bytes);
 * its buffers besides are one segment's payload (~1.5 MiB, ~4.6 MiB when every value is an escape).
 */
export const VERIFY_READ_PIECE_BYTES = 2 ** 20;
/**
 * Entries verify checks at once (a backend may name its own: S3, its maxConcurrentRequests, which
 * its transport keeps to anyway). A check waits on ~5 thread-pool round trips (lstat, open, fstat,
 * read, close) with the CPU idle between them: one at a time, `verify --no-decode` of 64k small
 * entries spent half of its 23 s idle. 8: twice libuv's 4 threads, so the pool stays busy while
 * the main thread hashes and decodes; more only queues there (and holds buffers meanwhile).
 */
export const VERIFY_CONCURRENCY = 8;
/**
 * The most bytes verify's buffers hold together (VerifyMemory): the blobs read whole and decode
 * blocks of the entries in flight, a reservation of VERIFY_WHOLE_BLOB_MAX_BYTES for each piecewise
 * check (it makes its own buffers, ~7 MiB at most), and buffers kept for reuse; an entry waits
 * for room. 32 MiB: ~3.5 times what one entry needs at most (a VERIFY_WHOLE_BLOB_MAX_BYTES blob and
 * a VERIFY_DECODE_BLOCK_BYTES block, or a piecewise check), so large entries are checked three at a
 * time and small ones VERIFY_CONCURRENCY at a time. A blob above it (read whole only where the
 * backend reads no parts, S3, or in versions 1 and 2) is read into one more buffer, kept for those
 * and lent to one at a time, as verify's one buffer was: at most this plus the largest such blob.
 */
export const VERIFY_IN_FLIGHT_BYTES = 32 * 2 ** 20;
