import type { SafetensorsDtype } from '@splitzip/safetensors';
import type { ReadThroughBlobStats } from '@splitzip/store';

/** Where a loaded tensor's bytes came from. */
export type TensorSource = 'cache' | 'raw';

/**
 * Why a tensor came from where it did:
 * - `cached`: decoded from its cache entry;
 * - `dtype`: not BF16, so never cached (served raw);
 * - `coverage`: BF16 but the build skipped it (its Top-16 exponent coverage was under the gate);
 * - `no-gain`: BF16 but a build with --skip-no-gain skipped it: its payload would not be smaller
 *   than its raw bytes (under 1,409 values, and 1,537-1,664 at the default chunk size, the payload's
 *   header, codebook and section padding outweigh them; else its escapes); a default build caches it
 *   if its coverage passes the gate (one under it, its bytes at hand, is `coverage`, as that build says);
 *   only where no entry holds its bytes: where entries of its size exist it is looked up by content
 *   key (its binding may be gone, its entry not: `gc --model` of another revision), else `missing`;
 * - `missing`: BF16 and no entry for its slice (not built, or not aliased to this shard slice), or
 *   its entry's blob was gone and a refresh found the entry removed since this handle's snapshot
 *   (a local cache: `splitzip gc --drop-unbound-entries`, a damaged manifest's recovery, a rebuilt cache; `detail`
 *   says so; with `cacheOnly`, NOT_CACHED): served raw;
 * - `stale`: the slice is bound, but its shard (a local file or an s3:// model's object) was checked
 *   and holds other bytes than the entry (the file was rewritten, or is another model's of the
 *   same name and layout): served raw;
 * - `unchecked`: the slice is bound, but the binding has no record of its shard's stamp (an
 *   object's ETag, or a local file's size, times and inode: a copy, a touched file, another model's of
 *   the same layout, any local file against an s3:// cache): served raw, and its bytes hashed;
 *   when they are the entry's, the stamp is recorded with the binding, so later loads of it are
 *   `cached` (`detail` says whether it was recorded), else the tensor is `stale`;
 * - `cache-failed`: an entry exists but failed (blob unreadable/corrupt, entry disagreeing with its
 *   blob, decode backend failure, digest mismatch); served raw, and `error` says what happened.
 */
export type LoadReason = 'cached' | 'dtype' | 'coverage' | 'no-gain' | 'missing' | 'stale' | 'unchecked' | 'cache-failed';

export const LOAD_REASONS: readonly LoadReason[] = ['cached', 'dtype', 'coverage', 'no-gain', 'missing', 'stale', 'unchecked', 'cache-failed'];

/** The per-tensor report. */
export interface TensorReport {
  name: string;
  /** The safetensors dtype, typed as its union (a loader maps it to its device format exhaustively). */
  dtype: SafetensorsDtype;
  shape: readonly number[];
  source: TensorSource;
  reason: LoadReason;
  /** Slice identity the tensor was looked up by. */
  shardName: string;
  offsetBytes: number;
  sizeBytes: number;
  /** Cache key of the entry, when there was one. */
  key?: string;
  /** A short human explanation of `reason` (e.g. `coverage 0.9712 < gate 0.99`). */
  detail?: string;
  /** For `cache-failed`: the typed error that made the runtime fall back to raw. */
  error?: { code: string; message: string };
  /** Bytes read from storage for this tensor: `blobBytesRead + rawBytesRead`. */
  bytesRead: number;
  /** Compressed blob bytes read (also counted when the entry then failed). */
  blobBytesRead: number;
  /** Bytes read from the safetensors shard. */
  rawBytesRead: number;
  /** Bytes of the tensor handed to the caller. */
  bytesProduced: number;
  /** Wall time of this tensor's reads (ms). Concurrent tensors overlap, so sums exceed wall time. */
  ioMs: number;
  /**
   * CPU time in checksum + decode (ms), summed over threads for a threaded backend (so it can
   * exceed the wall time); the store's readBlob checksum is counted in `ioMs` instead.
   */
  decodeMs: number;
  /** Time in the content-key digest check (ms); 0 when not asked. */
  digestMs: number;
  /** True when the decoded bytes were checked against their content key and matched. */
  digestVerified: boolean;
  /** Name of the decode backend used (cache source only). */
  backend?: string;
  /**
   * True when the payload was read in segment order and each segment decoded as soon as its bytes
   * were in (a custom reader, format v3, a backend that decodes it on the calling thread).
   */
  streamed?: boolean;
}

/** A loaded tensor: its bytes and its report. `data` is exactly `sizeBytes` long. */
export interface LoadedTensor {
  name: string;
  /** The safetensors dtype, typed as its union (a loader maps it to its device format exhaustively). */
  dtype: SafetensorsDtype;
  shape: readonly number[];
  data: Uint8Array;
  source: TensorSource;
  reason: LoadReason;
  report: TensorReport;
}

/** Totals over a load. Times are milliseconds. */
export interface LoadTotals {
  tensors: number;
  fromCache: number;
  fromRaw: number;
  byReason: Record<LoadReason, number>;
  /** Tensors that had an entry and fell back to raw (= byReason['cache-failed']). */
  fallbacks: number;
  bytesRead: number;
  bytesReadFromCache: number;
  bytesReadRaw: number;
  bytesProduced: number;
  /** Bytes the same tensors take in the safetensors shards (what a raw load reads). */
  rawBytes: number;
  ioMs: number;
  decodeMs: number;
  digestMs: number;
  wallMs: number;
  /** Decode backends seen (normally one). */
  backends: string[];
  /** Payloads larger than the pool's slots, staged in a one-off buffer instead. */
  stagingOverflows: number;
  /** Set when the refresh at the start of the load failed (store unreachable, manifest or journal damaged) and the load went on with the cache's snapshot. */
  refreshError?: { code: string; message: string };
  /**
   * Set when the local cache's journal is damaged (JOURNAL_INVALID, as the store found it at this
   * load's start): the cache still serves what it can read, but records nothing (the stamps and
   * bindings loads learn), so every process checks those tensors again; the message names
   * `splitzip verify` and `splitzip build --repair`.
   */
  journalDamage?: { code: string; message: string };
  /**
   * `s3://` caches opened with a `readThroughDir`: what that directory did for this load's blob
   * reads (the store's `readThroughStats()` now, less its counts when the load started; loads that
   * run at the same time on the same cache count each other's reads). `writeFailures` above 0 means
   * a full or unwritable directory: the loads go on, fetching from the object store every time.
   */
  readThrough?: ReadThroughBlobStats;
}

/** `now - start`, field by field. */
export function diffReadThroughStats(now: ReadThroughBlobStats, start: ReadThroughBlobStats): ReadThroughBlobStats {
  return {
    hits: now.hits - start.hits,
    misses: now.misses - start.misses,
    damaged: now.damaged - start.damaged,
    written: now.written - start.written,
    writeFailures: now.writeFailures - start.writeFailures,
  };
}

export function createEmptyTotals(): LoadTotals {
  return {
    tensors: 0,
    fromCache: 0,
    fromRaw: 0,
    byReason: { cached: 0, dtype: 0, coverage: 0, 'no-gain': 0, missing: 0, stale: 0, unchecked: 0, 'cache-failed': 0 },
    fallbacks: 0,
    bytesRead: 0,
    bytesReadFromCache: 0,
    bytesReadRaw: 0,
    bytesProduced: 0,
    rawBytes: 0,
    ioMs: 0,
    decodeMs: 0,
    digestMs: 0,
    wallMs: 0,
    backends: [],
    stagingOverflows: 0,
  };
}

/** Adds one tensor's report to running totals (in place). */
export function addToTotals(totals: LoadTotals, report: TensorReport): void {
  totals.tensors += 1;
  if (report.source === 'cache') totals.fromCache += 1;
  else totals.fromRaw += 1;
  totals.byReason[report.reason] += 1;
  if (report.reason === 'cache-failed') totals.fallbacks += 1;
  totals.bytesRead += report.bytesRead;
  totals.bytesReadFromCache += report.blobBytesRead;
  totals.bytesReadRaw += report.rawBytesRead;
  totals.bytesProduced += report.bytesProduced;
  totals.rawBytes += report.sizeBytes;
  totals.ioMs += report.ioMs;
  totals.decodeMs += report.decodeMs;
  totals.digestMs += report.digestMs;
  if (report.backend !== undefined && !totals.backends.includes(report.backend)) totals.backends.push(report.backend);
}
