import { crc32 } from 'node:zlib';
import { Packr, Unpackr } from 'msgpackr';
import { describeValue } from './describe-value.js';
import { StoreError } from './errors.js';
import type { BindingsPerFile } from './slice-bindings.js';
import { JOURNAL_RECORD_TARGET_BYTES, JOURNAL_VERSION, JOURNAL_VERSION_OBJECT_BINDINGS, JOURNAL_VERSION_ONE_BINDING, MAX_GENERATION, MAX_JOURNAL_RECORD_BYTES, MAX_NEWER_JOURNAL_VERSION } from './limits.js';
import type { StoreOp } from './store-state.js';
import { entryToDisk, parseDiskEntry, validateSliceKey } from './validate-entry.js';

// Plain MessagePack (no msgpackr record extension) so any MessagePack reader can read a journal.
const packr = new Packr({ useRecords: false, moreTypes: false });
const unpackr = new Unpackr({ useRecords: false, moreTypes: false, mapsAsObjects: true });

/** ASCII "SZJOURNL", then u32 version, u32 generation. */
const JOURNAL_MAGIC = [0x53, 0x5a, 0x4a, 0x4f, 0x55, 0x52, 0x4e, 0x4c];
export const JOURNAL_HEADER_BYTES = 16;
/** "SZJR" little-endian. */
const RECORD_MAGIC = 0x524a5a53;
const RECORD_HEADER_BYTES = 12;

const OP_ADD = 1;
const OP_ALIAS = 2;
const OP_REBIND = 3;
const OP_SEAL = 9;

/**
 * The journal version written after a manifest of `state`: 2 (JOURNAL_VERSION) only once a slice
 * holds a second binding, 3 only once one holds an object's binding beside another (phase 3).
 */
export function journalVersionFor(state: { readonly holdsSecondBindings: boolean; readonly holdsObjectBindingsBeside?: boolean }): number {
  if (state.holdsObjectBindingsBeside === true) return JOURNAL_VERSION_OBJECT_BINDINGS;
  return state.holdsSecondBindings ? JOURNAL_VERSION : JOURNAL_VERSION_ONE_BINDING;
}

/** Which bindings a journal of `version` may add beside others (its ops replayed so). */
export function bindingsPerFileOfJournal(version: number): BindingsPerFile {
  return version >= JOURNAL_VERSION_OBJECT_BINDINGS ? 'objects' : version >= JOURNAL_VERSION;
}

/** A journal header of `version` (journalVersionFor: 1, as 0.55.0 wrote, until a slice holds a second binding). */
export function encodeJournalHeader(generation: number, version: number = JOURNAL_VERSION_ONE_BINDING): Uint8Array {
  const bytes = new Uint8Array(JOURNAL_HEADER_BYTES);
  bytes.set(JOURNAL_MAGIC, 0);
  const view = new DataView(bytes.buffer);
  view.setUint32(8, version, true);
  view.setUint32(12, generation, true);
  return bytes;
}

/** Validates a journal header against the generation the manifest names; returns its version (1, or 2: its ops may add second bindings). */
export function checkJournalHeader(bytes: Uint8Array, generation: number, path: string): number {
  if (bytes.length < JOURNAL_HEADER_BYTES || JOURNAL_MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new StoreError('JOURNAL_INVALID', 'journal does not start with "SZJOURNL"', { path, details: { headerBytes: bytes.length } });
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, JOURNAL_HEADER_BYTES);
  const version = view.getUint32(8, true);
  // Older than any journal this store ever wrote (a zeroed or flipped version field): damage, which
  // the cache can be recovered from. A newer version is another program's format.
  if (version < JOURNAL_VERSION_ONE_BINDING) {
    throw new StoreError('JOURNAL_INVALID', `journal version ${version} is older than any journal written (${JOURNAL_VERSION_ONE_BINDING}): damaged`, { path, details: { version } });
  }
  // Far above this one: no release wrote it (versions go up one at a time), a flipped bit did
  // (1 -> 513): damage too. Every open failed on it as a newer format, and no tool recovered it.
  if (version > MAX_NEWER_JOURNAL_VERSION) {
    throw new StoreError('JOURNAL_INVALID', `journal version ${version} is above any a release could have written (${MAX_NEWER_JOURNAL_VERSION}): damaged`, { path, details: { version } });
  }
  if (version > JOURNAL_VERSION_OBJECT_BINDINGS) {
    throw new StoreError(
      'UNSUPPORTED_FORMAT',
      `journal version ${version} is not ${JOURNAL_VERSION_ONE_BINDING}, ${JOURNAL_VERSION} or ${JOURNAL_VERSION_OBJECT_BINDINGS}: written by a newer release (if none wrote this cache, the header is damaged: move the journal aside and run \`splitzip build <model> --out <cache> --repair\`, which goes on from the manifest)`,
      { path, details: { version } },
    );
  }
  const found = view.getUint32(12, true);
  if (found !== generation) {
    throw new StoreError('JOURNAL_INVALID', `journal header says generation ${found}, the manifest ${generation}`, {
      path,
      details: { found, generation },
    });
  }
  return version;
}

function encodeOp(op: StoreOp): Uint8Array {
  let value: unknown[];
  switch (op.kind) {
    case 'add':
      value = [OP_ADD, op.key, entryToDisk(op.entry)];
      break;
    case 'alias':
    case 'rebind':
      // The binding's stamps, where it has any, are a sixth element (an array: all of them, not a change).
      value = [op.kind === 'alias' ? OP_ALIAS : OP_REBIND, op.key, ...op.slice];
      break;
    case 'seal':
      value = [OP_SEAL, op.nextGeneration];
      break;
  }
  // Copy: msgpackr may reuse its buffer on the next pack.
  return Uint8Array.prototype.slice.call(packr.pack(value));
}

function frameRecord(opBytes: readonly Uint8Array[]): Uint8Array {
  let bodyBytes = 5;
  for (const b of opBytes) bodyBytes += b.length;
  const record = new Uint8Array(RECORD_HEADER_BYTES + bodyBytes);
  const view = new DataView(record.buffer);
  view.setUint32(0, RECORD_MAGIC, true);
  view.setUint32(4, bodyBytes, true);
  // The body is a MessagePack array32 whose elements are the separately packed ops.
  record[RECORD_HEADER_BYTES] = 0xdd;
  view.setUint32(RECORD_HEADER_BYTES + 1, opBytes.length, false);
  let at = RECORD_HEADER_BYTES + 5;
  for (const b of opBytes) {
    record.set(b, at);
    at += b.length;
  }
  view.setUint32(8, crc32(record.subarray(RECORD_HEADER_BYTES), crc32(record.subarray(4, 8))) >>> 0, true);
  return record;
}

/**
 * Encodes ops (in order) as one or more framed records, concatenated for a single write. Records are
 * cut at JOURNAL_RECORD_TARGET_BYTES; any prefix of them is a consistent state because each op
 * depends only on earlier ones.
 */
export function encodeJournalRecords(ops: readonly StoreOp[]): Uint8Array {
  const records = encodeJournalRecordList(ops);
  if (records.length === 1) return records[0]!;
  const total = records.reduce((n, r) => n + r.length, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const r of records) {
    out.set(r, at);
    at += r.length;
  }
  return out;
}

/** The framed records of `ops` (encodeJournalRecords), each on its own. */
export function encodeJournalRecordList(ops: readonly StoreOp[]): Uint8Array[] {
  const records: Uint8Array[] = [];
  let group: Uint8Array[] = [];
  let groupBytes = 0;
  for (const op of ops) {
    const bytes = encodeOp(op);
    if (bytes.length + 5 > MAX_JOURNAL_RECORD_BYTES) {
      throw new StoreError('SIZE_INVALID', `one journal operation needs ${bytes.length} bytes, above MAX_JOURNAL_RECORD_BYTES`, {
        details: { opBytes: bytes.length, limit: MAX_JOURNAL_RECORD_BYTES },
      });
    }
    if (group.length > 0 && groupBytes + bytes.length > JOURNAL_RECORD_TARGET_BYTES) {
      records.push(frameRecord(group));
      group = [];
      groupBytes = 0;
    }
    group.push(bytes);
    groupBytes += bytes.length;
  }
  if (group.length > 0) records.push(frameRecord(group));
  return records;
}

/** Bytes of a record's header (magic, length, CRC): what identifies a record at its offset. */
export const JOURNAL_RECORD_HEADER_BYTES = RECORD_HEADER_BYTES;

function decodeOp(value: unknown, path: string, offsetBytes: number): StoreOp {
  const fail = (message: string): never => {
    throw new StoreError('JOURNAL_INVALID', `record at offset ${offsetBytes}: ${message}`, { path, details: { offsetBytes } });
  };
  if (!Array.isArray(value) || value.length < 2) return fail('an operation must be an array');
  const [kind, key] = value as unknown[];
  switch (kind) {
    case OP_ADD:
      if (value.length !== 3 || typeof key !== 'string') return fail('add must be [1, key, entry]');
      return { kind: 'add', key, entry: parseDiskEntry(key, value[2]) };
    case OP_ALIAS:
    case OP_REBIND: {
      if ((value.length !== 5 && value.length !== 6) || typeof key !== 'string') return fail('alias must be [2|3, key, shardName, offsetBytes, sizeBytes, stamps?]');
      const slice = validateSliceKey(value.slice(2), key, 'ENTRY_INVALID');
      return { kind: kind === OP_ALIAS ? 'alias' : 'rebind', key, slice };
    }
    case OP_SEAL:
      if (value.length !== 2 || typeof key !== 'number' || !Number.isInteger(key) || key < 1 || key > MAX_GENERATION) {
        return fail('seal must be [9, nextGeneration]');
      }
      return { kind: 'seal', nextGeneration: key };
    default:
      return fail(`unknown operation ${describeValue(kind)}`);
  }
}

export interface JournalRecord {
  /** File offset just past this record. */
  endOffset: number;
  ops: StoreOp[];
}

export interface JournalScan {
  records: JournalRecord[];
  /** File offset just past the last valid record (= start offset when none). */
  validEndOffset: number;
  /** Why the scan stopped: at the end of the bytes, at a record not fully there yet, or at an invalid one. */
  stop: 'end' | 'incomplete' | 'invalid';
  /** With `stop: 'incomplete'`: the whole size of the record cut off, where its header was there to say (at most 12 + MAX_JOURNAL_RECORD_BYTES). */
  nextRecordBytes?: number;
  /**
   * With `keepInvalidContent`: the error of the first record whose CRC holds over content that is
   * not valid ops (the scan stops before it, `validEndOffset` its offset); absent otherwise.
   */
  invalidContent?: { offsetBytes: number; error: unknown };
}

/**
 * Parses the records in `bytes` (which start at file offset `startOffset`). Stops at the first
 * incomplete or invalid (magic, length, CRC) record: a torn tail. A record whose CRC holds but whose
 * content is invalid is not a torn write and throws JOURNAL_INVALID.
 */
export function scanJournalRecords(bytes: Uint8Array, startOffset: number, path: string, { keepInvalidContent = false }: { keepInvalidContent?: boolean } = {}): JournalScan {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const records: JournalRecord[] = [];
  let at = 0;
  let stop: JournalScan['stop'] = 'end';
  while (at < bytes.length) {
    if (bytes.length - at < RECORD_HEADER_BYTES) {
      stop = 'incomplete';
      break;
    }
    const magic = view.getUint32(at, true);
    const bodyBytes = view.getUint32(at + 4, true);
    if (magic !== RECORD_MAGIC || bodyBytes < 1 || bodyBytes > MAX_JOURNAL_RECORD_BYTES) {
      stop = 'invalid';
      break;
    }
    if (bytes.length - at - RECORD_HEADER_BYTES < bodyBytes) {
      return { records, validEndOffset: records.at(-1)?.endOffset ?? startOffset, stop: 'incomplete', nextRecordBytes: RECORD_HEADER_BYTES + bodyBytes };
    }
    const body = bytes.subarray(at + RECORD_HEADER_BYTES, at + RECORD_HEADER_BYTES + bodyBytes);
    const crc = crc32(body, crc32(bytes.subarray(at + 4, at + 8))) >>> 0;
    if (crc !== view.getUint32(at + 8, true)) {
      stop = 'invalid';
      break;
    }
    const recordOffset = startOffset + at;
    let ops: StoreOp[];
    try {
      ops = decodeRecordBody(body, path, recordOffset);
    } catch (error) {
      // The caller (catchUp) reports such a record as damage with the records before it applied.
      if (!keepInvalidContent) throw error;
      return { records, validEndOffset: records.at(-1)?.endOffset ?? startOffset, stop: 'invalid', invalidContent: { offsetBytes: recordOffset, error } };
    }
    at += RECORD_HEADER_BYTES + bodyBytes;
    records.push({ endOffset: startOffset + at, ops });
  }
  return { records, validEndOffset: records.at(-1)?.endOffset ?? startOffset, stop };
}

/** A record's body as ops: JOURNAL_INVALID (or an entry's own code) where it is not valid ops. */
function decodeRecordBody(body: Uint8Array, path: string, recordOffset: number): StoreOp[] {
  let decoded: unknown;
  try {
    decoded = unpackr.unpack(body);
  } catch (error) {
    throw new StoreError('JOURNAL_INVALID', `record at offset ${recordOffset} is not MessagePack`, { path, cause: error, details: { offsetBytes: recordOffset } });
  }
  if (!Array.isArray(decoded)) {
    throw new StoreError('JOURNAL_INVALID', `record at offset ${recordOffset} is not an array of operations`, { path, details: { offsetBytes: recordOffset } });
  }
  return decoded.map((op) => decodeOp(op, path, recordOffset));
}

const RECORD_MAGIC_BYTES = Buffer.from([0x53, 0x5a, 0x4a, 0x52]); // "SZJR"

/** Offsets (within `bytes`) where a record header's magic starts, from `from` on (a native search: a long tail of zeros costs a memchr, not a loop). */
export function findRecordMagic(bytes: Uint8Array, from: number): number[] {
  const found: number[] = [];
  const haystack = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = haystack.indexOf(RECORD_MAGIC_BYTES, Math.max(0, from)); at !== -1; at = haystack.indexOf(RECORD_MAGIC_BYTES, at + 1)) found.push(at);
  return found;
}

/**
 * The whole size of the record whose 12-byte header is `header` (magic and a length within
 * MAX_JOURNAL_RECORD_BYTES), or undefined when it is not one.
 */
export function framedRecordBytes(header: Uint8Array): number | undefined {
  if (header.length < RECORD_HEADER_BYTES) return undefined;
  const view = new DataView(header.buffer, header.byteOffset, RECORD_HEADER_BYTES);
  const bodyBytes = view.getUint32(4, true);
  if (view.getUint32(0, true) !== RECORD_MAGIC || bodyBytes < 1 || bodyBytes > MAX_JOURNAL_RECORD_BYTES) return undefined;
  return RECORD_HEADER_BYTES + bodyBytes;
}

/** True when `record` (header and body, exactly) is a framed record whose CRC holds. */
export function isIntactRecord(record: Uint8Array): boolean {
  if (framedRecordBytes(record) !== record.length) return false;
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
  return (crc32(record.subarray(RECORD_HEADER_BYTES), crc32(record.subarray(4, 8))) >>> 0) === view.getUint32(8, true);
}
