import { createHash } from 'node:crypto';
import { findDuplicateJsonKey } from '@splitzip/safetensors';
import { MAX_HOST_STAMP_FILE_BYTES } from './limits.js';
import { isSameStampSet, mergeSliceStamps } from './merge-slice-stamps.js';
import type { ReadThroughCache } from './read-through-cache.js';
import { shardStampKind } from './shard-stamp-kind.js';
import type { SliceKeyTuple } from './types.js';
import { isContentKey, validateSliceKey } from './validate-entry.js';

/** Starts every host-stamp file: a format tag, then the SHA-256 of the body. */
const MAGIC = new TextEncoder().encode('SZHSTMP1');
const DIGEST_BYTES = 32;
/** magic (8) | SHA-256 of the body (32), then the body (UTF-8 JSON). */
export const HOST_STAMP_FILE_HEADER_BYTES = MAGIC.length + DIGEST_BYTES;
/** The body's `version`. */
export const HOST_STAMP_FILE_VERSION = 1;

const NO_STAMPS: readonly string[] = Object.freeze([]);
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** A shard's records: `<offset>:<size>:<key>` → its file stamps, in recording order; least recently recorded record first. */
type ShardRecords = Map<string, readonly string[]>;

/** One file stamp to record: the slice (its stamps ignored) is bound to `key` in the cache. */
export interface HostStampWrite {
  slice: SliceKeyTuple;
  key: string;
  stamp: string;
}

function recordId(offsetBytes: number, sizeBytes: number, key: string): string {
  return `${offsetBytes}:${sizeBytes}:${key}`;
}

/** `stamps.<sha256 hex of the UTF-8 shard name>.bin`: no other name of a read-through directory starts with `stamps.`. */
export function hostStampFileName(shardName: string): string {
  return `stamps.${createHash('sha256').update(shardName, 'utf8').digest('hex')}.bin`;
}

/**
 * The file's bytes for these records, the least recently recorded dropped first until it fits
 * MAX_HOST_STAMP_FILE_BYTES (a larger file would be refused whole by every reader). Returns the
 * records kept too.
 */
export function serializeHostStampFile(shardName: string, records: ShardRecords): { bytes: Uint8Array; kept: ShardRecords } {
  const opening = `{"version":${HOST_STAMP_FILE_VERSION},"shard":${JSON.stringify(shardName)},"records":[`;
  const closing = ']}\n';
  const texts = [...records].map(([id, stamps]) => {
    const [offset, size, key] = id.split(':');
    return JSON.stringify([Number(offset), Number(size), key, stamps]);
  });
  const ids = [...records.keys()];
  let total = HOST_STAMP_FILE_HEADER_BYTES + Buffer.byteLength(opening) + closing.length;
  for (const text of texts) total += Buffer.byteLength(text) + 1;
  let first = 0;
  while (first < texts.length && total > MAX_HOST_STAMP_FILE_BYTES) total -= Buffer.byteLength(texts[first++]!) + 1;
  const body = encoder.encode(`${opening}${texts.slice(first).join(',')}${closing}`);
  const bytes = new Uint8Array(HOST_STAMP_FILE_HEADER_BYTES + body.length);
  bytes.set(MAGIC, 0);
  bytes.set(createHash('sha256').update(body).digest(), MAGIC.length);
  bytes.set(body, HOST_STAMP_FILE_HEADER_BYTES);
  const kept: ShardRecords = first === 0 ? records : new Map(ids.slice(first).map((id) => [id, records.get(id)!]));
  return { bytes, kept };
}

/**
 * The records of a host-stamp file of `shardName`, or undefined when it fails any check (length,
 * magic, digest, UTF-8 JSON without repeated keys, exactly the fields of the format, the shard name,
 * each record's offsets, key and file stamps, no record twice). Never throws: a damaged or foreign
 * file counts as absent (its stamps are checked again). An intact file is this host's record, as
 * trusted as a local cache's journal: the directory is the host's own.
 */
export function parseHostStampFile(bytes: Uint8Array, shardName: string): ShardRecords | undefined {
  try {
    if (bytes.length <= HOST_STAMP_FILE_HEADER_BYTES || bytes.length > MAX_HOST_STAMP_FILE_BYTES) return undefined;
    if (!MAGIC.every((byte, at) => bytes[at] === byte)) return undefined;
    const body = bytes.subarray(HOST_STAMP_FILE_HEADER_BYTES);
    const digest = createHash('sha256').update(body).digest();
    if (!digest.equals(bytes.subarray(MAGIC.length, HOST_STAMP_FILE_HEADER_BYTES))) return undefined;
    const text = decoder.decode(body);
    if (findDuplicateJsonKey(text)) return undefined;
    const json = JSON.parse(text) as unknown;
    if (json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
    const fields = json as Record<string, unknown>;
    if (Object.keys(fields).sort().join() !== 'records,shard,version') return undefined;
    if (fields.version !== HOST_STAMP_FILE_VERSION || fields.shard !== shardName || !Array.isArray(fields.records)) return undefined;
    const records: ShardRecords = new Map();
    for (const record of fields.records as unknown[]) {
      if (!Array.isArray(record) || record.length !== 4) return undefined;
      const [offsetBytes, sizeBytes, key, stamps] = record as unknown[];
      if (typeof key !== 'string' || !isContentKey(key)) return undefined;
      // The slice key check of the store's own files (safe non-negative integers, 1..MAX_SLICE_STAMPS
      // distinct stamps of bounded length); throws on any failure.
      const slice = validateSliceKey([shardName, offsetBytes, sizeBytes, stamps], undefined, 'ENTRY_INVALID');
      const checked = slice[3]!;
      if (!checked.every((stamp) => shardStampKind(stamp) === 'file')) return undefined;
      const id = recordId(slice[1], slice[2], key);
      if (records.has(id)) return undefined;
      records.set(id, checked);
    }
    return records;
  } catch {
    return undefined;
  }
}

/**
 * File stamps an S3 cache records for this host (the S3 store keeps object stamps only in the
 * bucket: a file stamp describes one host's file). Always kept in memory for this store instance;
 * with a read-through directory also in one file per shard name there (README "Host file stamps"),
 * so that this host's other processes see them. A record is (slice, key) → stamps: shown only on a
 * binding of that slice to that key, never on one to another key.
 *
 * Writers merge into the file as they find it (read again just before) and rename theirs over it:
 * two processes writing one shard's file at once may lose one's record (the reader then checks
 * those bytes again and records it once more). Nothing here throws: an unreadable or damaged file
 * reads as absent, and a write that fails leaves the record in memory (counted in `counts`).
 */
export class HostFileStamps {
  /** This instance's records per shard name, whatever happened to the files. */
  private readonly recorded = new Map<string, ShardRecords>();
  /** The files' records per shard name as last read or written (undefined: absent or refused), until forgetLoaded. */
  private readonly loaded = new Map<string, ShardRecords | undefined>();
  /** One write at a time per shard name in this instance: two would drop each other's records. */
  private readonly writing = new Map<string, Promise<void>>();
  /** Files written, and writes that failed (full disk, unwritable directory): ignored otherwise. */
  readonly counts = { written: 0, writeFailures: 0 };

  constructor(private readonly dir: ReadThroughCache | undefined) {}

  /** The host file stamps of the slice's binding to `key`: the file's, then this instance's, the MAX_SLICE_STAMPS mergeSliceStamps keeps. */
  stampsOf(shardName: string, offsetBytes: number, sizeBytes: number, key: string): readonly string[] {
    const id = recordId(offsetBytes, sizeBytes, key);
    const mine = this.recorded.get(shardName)?.get(id);
    const file = this.fileRecords(shardName)?.get(id);
    if (file === undefined) return mine ?? NO_STAMPS;
    if (mine === undefined) return file;
    return mergeSliceStamps(file, mine);
  }

  /** Drops the copies of files read: the next lookup reads them again (other processes' records). */
  forgetLoaded(): void {
    this.loaded.clear();
  }

  /** Records file stamps (others are ignored), in memory at once, then in the files of their shards. Never rejects. */
  async record(writes: readonly HostStampWrite[]): Promise<void> {
    const touched = new Set<string>();
    for (const { slice, key, stamp } of writes) {
      if (shardStampKind(stamp) !== 'file') continue;
      const [shardName, offsetBytes, sizeBytes] = slice;
      const id = recordId(offsetBytes, sizeBytes, key);
      let records = this.recorded.get(shardName);
      if (!records) this.recorded.set(shardName, (records = new Map()));
      const current = records.get(id);
      if (current?.includes(stamp)) {
        if (this.dir && !this.fileRecords(shardName)?.get(id)?.includes(stamp)) touched.add(shardName); // the file lacks it (a failed or lost write)
        continue;
      }
      const next = mergeSliceStamps(current ?? NO_STAMPS, [stamp]);
      // A stamp ranking last past MAX_SLICE_STAMPS (mergeSliceStamps) changes nothing: not recorded, not written.
      if (current !== undefined && isSameStampSet(current, next)) continue;
      // Moved to the end: the most recently recorded records are the last a full file drops.
      records.delete(id);
      records.set(id, next);
      touched.add(shardName);
    }
    if (!this.dir) return;
    await Promise.all([...touched].map((shardName) => this.persist(shardName)));
  }

  private fileRecords(shardName: string): ShardRecords | undefined {
    if (!this.dir) return undefined;
    if (!this.loaded.has(shardName)) this.loaded.set(shardName, this.readFile(shardName));
    return this.loaded.get(shardName);
  }

  private readFile(shardName: string): ShardRecords | undefined {
    const bytes = this.dir?.readSmallFileSync(hostStampFileName(shardName), MAX_HOST_STAMP_FILE_BYTES);
    return bytes === undefined ? undefined : parseHostStampFile(bytes, shardName);
  }

  private persist(shardName: string): Promise<void> {
    // writeFile handles its I/O errors; anything else it meets is a failed write too, never a rejection.
    const next = (this.writing.get(shardName) ?? Promise.resolve()).then(() => this.writeFile(shardName)).catch(() => void this.counts.writeFailures++);
    this.writing.set(shardName, next);
    void next.finally(() => {
      if (this.writing.get(shardName) === next) this.writing.delete(shardName);
    });
    return next;
  }

  /** Merges every record of this instance for the shard into its file as it is now, and writes it if that adds anything. */
  private async writeFile(shardName: string): Promise<void> {
    const dir = this.dir!;
    const fresh = this.readFile(shardName);
    const merged: ShardRecords = new Map(fresh ?? []);
    let changed = false;
    for (const [id, stamps] of this.recorded.get(shardName) ?? []) {
      const current = merged.get(id);
      if (current !== undefined && stamps.every((stamp) => current.includes(stamp))) continue;
      const next = current === undefined ? stamps : mergeSliceStamps(current, stamps);
      if (current !== undefined && isSameStampSet(current, next)) continue; // this instance's stamps all rank last
      merged.delete(id);
      merged.set(id, next);
      changed = true;
    }
    if (!changed) {
      this.loaded.set(shardName, fresh);
      return;
    }
    const { bytes, kept } = serializeHostStampFile(shardName, merged);
    try {
      await dir.writeFile(hostStampFileName(shardName), [bytes]);
      this.counts.written++;
      this.loaded.set(shardName, kept);
    } catch {
      // Only a cost: this process still has the record in memory; another checks the bytes again.
      this.counts.writeFailures++;
      this.loaded.delete(shardName);
    }
  }
}
