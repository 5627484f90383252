import { codebookFromJson, computePayloadLayout, type CodebookJson, MAX_CHUNK_SIZE, MAX_ELEMENT_COUNT, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { countShapeElements } from './compute-content-key.js';
import { describeValue, detailValue } from './describe-value.js';
import { StoreError, isStoreError } from './errors.js';
import {
  MAX_BLOB_BYTES,
  MAX_QUALNAME_CHARS,
  MAX_RAW_BYTES,
  MAX_SHARD_NAME_CHARS,
  MAX_SLICE_KEYS_PER_ENTRY,
  MAX_SLICE_OFFSET_BYTES,
  MAX_SLICE_STAMP_CHARS,
  MAX_SLICE_STAMPS,
  READABLE_PAYLOAD_VERSIONS,
} from './limits.js';
import type { StringPool } from './string-pool.js';
import type { CacheEntry, PayloadMetaJson, SliceKeyTuple } from './types.js';

const KEY_PATTERN = /^[0-9a-f]{40}$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;
const BLOB_CHECKSUM_PATTERN = /^xxh32:[0-9a-f]{8}$/;

/** The on-disk (manifest and journal) form of an entry: the seed's snake_case fields plus the trust fields. */
export interface DiskEntry {
  qualname: string;
  blob: string;
  codebook: { exponents: number[] };
  meta: {
    version: number;
    element_count: number;
    chunk_size: number;
    chunk_count: number;
    escape_count: number;
    comp_bytes: number;
    raw_bytes: number;
    checksum: number;
  };
  raw_bytes: number;
  slice_keys: ([string, number, number] | [string, number, number, string[]])[];
  dtype: 'BF16';
  shape: number[];
  format_version: number;
  comp_bytes: number;
  blob_checksum: string;
  /** Absent when the writer recorded none (CacheEntry.blobSha256). */
  blob_sha256?: string;
  /** Absent when the writer recorded none (CacheEntry.sha256). */
  sha256?: string;
}

export function isContentKey(value: unknown): value is string {
  return typeof value === 'string' && KEY_PATTERN.test(value);
}

export function isSha256Hex(value: unknown): value is string {
  return typeof value === 'string' && SHA256_PATTERN.test(value);
}

/** The only blob path an entry may have. */
export function canonicalBlobPath(key: string): string {
  return `blobs/${key}.bin`;
}

export function formatBlobChecksum(checksum: number): string {
  return `xxh32:${(checksum >>> 0).toString(16).padStart(8, '0')}`;
}

/** Separator-free identity of a slice key for maps. */
export function sliceId(shardName: string, offsetBytes: number, sizeBytes: number, _stamps?: readonly string[]): string {
  return `${offsetBytes}:${sizeBytes}:${shardName}`;
}

/** A path part `..` (parts split at `/` or a backslash). */
const DOT_DOT_PART = /(?:^|[\\/])\.\.(?:[\\/]|$)/;

/** Rejects blob paths that are absolute, contain `..`, or are not exactly `blobs/<key>.bin`. */
export function validateBlobPath(key: string, blob: unknown): string {
  if (typeof blob !== 'string' || blob.length === 0 || blob.length > 4096 || blob.includes('\0')) {
    return unsafeBlobPath(key, blob, 'invalid', 'blob path must be a non-empty string without NUL');
  }
  if (blob.startsWith('/') || blob.startsWith('\\') || /^[A-Za-z]:/.test(blob)) {
    return unsafeBlobPath(key, blob, 'absolute', `blob path ${describeValue(blob)} is absolute`);
  }
  if (DOT_DOT_PART.test(blob)) {
    return unsafeBlobPath(key, blob, 'dot-dot', `blob path ${describeValue(blob)} contains ".."`);
  }
  if (blob !== canonicalBlobPath(key)) {
    return unsafeBlobPath(key, blob, 'not-canonical', `blob path ${describeValue(blob)} is not ${canonicalBlobPath(key)}`);
  }
  return blob;
}

// Not a closure in validateBlobPath: a manifest's open calls that once per entry.
function unsafeBlobPath(key: string, blob: unknown, reason: string, message: string): never {
  throw new StoreError('UNSAFE_BLOB_PATH', message, { entry: key, details: { reason, blob: detailValue(blob) } });
}

function requireObject(value: unknown, field: string, key: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StoreError('ENTRY_INVALID', `${field} must be an object`, { entry: key, details: { field } });
  }
  return value as Record<string, unknown>;
}

/** A size field: a non-negative integer at most `limit` (named in the error). */
export function requireSize(value: unknown, field: string, limit: number, limitName: string, key?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > limit) {
    throw new StoreError('SIZE_INVALID', `${field} must be an integer in 0..${limitName} (${limit}), got ${describeValue(value)}`, {
      entry: key,
      details: { field, value: detailValue(value), limit, limitName },
    });
  }
  return value;
}

function mismatch(key: string, message: string, details: Record<string, unknown>): never {
  throw new StoreError('ENTRY_INVALID', message, { entry: key, details });
}

/** Validates one slice key tuple (from a file or a caller); `pool` shares its shard name and stamps with other entries'. */
export function validateSliceKey(value: unknown, key: string | undefined, code: 'ENTRY_INVALID' | 'INVALID_ARGUMENT', pool?: StringPool): SliceKeyTuple {
  if (!Array.isArray(value) || (value.length !== 3 && value.length !== 4)) {
    throw new StoreError(code, 'a slice key must be [shardName, offsetBytes, sizeBytes] or [shardName, offsetBytes, sizeBytes, stamps]', {
      entry: key,
      details: { sliceKey: detailValue(value) },
    });
  }
  const [shardName, offsetBytes, sizeBytes, stamps] = value as unknown[];
  if (value.length === 4) validateStamps(stamps, key, code);
  if (typeof shardName !== 'string' || shardName.length === 0 || shardName.length > MAX_SHARD_NAME_CHARS || shardName.includes('\0')) {
    throw new StoreError(code, `slice shardName must be a non-empty string of at most ${MAX_SHARD_NAME_CHARS} characters without NUL`, {
      entry: key,
      details: { shardName: detailValue(shardName) },
    });
  }
  try {
    requireSize(offsetBytes, 'slice offsetBytes', MAX_SLICE_OFFSET_BYTES, 'MAX_SLICE_OFFSET_BYTES', key);
    requireSize(sizeBytes, 'slice sizeBytes', MAX_SLICE_OFFSET_BYTES, 'MAX_SLICE_OFFSET_BYTES', key);
  } catch (error) {
    if (code === 'INVALID_ARGUMENT' && isStoreError(error)) {
      throw new StoreError('INVALID_ARGUMENT', error.reason, { entry: key, details: error.details });
    }
    throw error;
  }
  const name = pool ? pool.intern(shardName) : shardName;
  return Object.freeze(
    value.length === 4
      ? ([name, offsetBytes as number, sizeBytes as number, pool ? pool.internStamps(stamps as string[]) : Object.freeze([...(stamps as string[])])] as const)
      : ([name, offsetBytes as number, sizeBytes as number] as const),
  );
}

/** A binding's stamps: 1..MAX_SLICE_STAMPS distinct non-empty strings, each at most MAX_SLICE_STAMP_CHARS, without NUL. */
function validateStamps(stamps: unknown, key: string | undefined, code: 'ENTRY_INVALID' | 'INVALID_ARGUMENT'): void {
  const valid =
    Array.isArray(stamps) &&
    stamps.length > 0 &&
    stamps.length <= MAX_SLICE_STAMPS &&
    (stamps.length === 1 || new Set(stamps).size === stamps.length) &&
    areValidStamps(stamps);
  if (!valid) {
    throw new StoreError(
      code,
      `slice stamps must be 1 to ${MAX_SLICE_STAMPS} distinct non-empty strings of at most ${MAX_SLICE_STAMP_CHARS} characters without NUL`,
      { entry: key, details: { stamps: Array.isArray(stamps) ? stamps.slice(0, 4).map(detailValue) : detailValue(stamps) } },
    );
  }
}

// By index, not every(): every skips a caller's array's holes, and a hole was written as a stamp
// (null in the manifest, which then failed to open).
function areValidStamps(stamps: readonly unknown[]): boolean {
  for (let i = 0; i < stamps.length; i++) {
    const s = stamps[i];
    if (typeof s !== 'string' || s.length === 0 || s.length > MAX_SLICE_STAMP_CHARS || s.includes('\0')) return false;
  }
  return true;
}

function parseMeta(key: string, value: unknown): PayloadMetaJson {
  const m = requireObject(value, 'meta', key);
  // Entries written by an earlier codec keep their payload version; the codec still reads them.
  if (typeof m.version !== 'number' || !READABLE_PAYLOAD_VERSIONS.includes(m.version)) {
    throw new StoreError('UNSUPPORTED_PAYLOAD_VERSION', `meta.version ${describeValue(m.version)} is not one of ${READABLE_PAYLOAD_VERSIONS.join(', ')}`, {
      entry: key,
      details: { version: detailValue(m.version) },
    });
  }
  const elementCount = requireSize(m.element_count, 'meta.element_count', MAX_ELEMENT_COUNT, 'MAX_ELEMENT_COUNT', key);
  const chunkSize = requireSize(m.chunk_size, 'meta.chunk_size', MAX_CHUNK_SIZE, 'MAX_CHUNK_SIZE', key);
  if (chunkSize < MIN_CHUNK_SIZE || (chunkSize & (chunkSize - 1)) !== 0) {
    mismatch(key, 'meta.chunk_size must be a power of two in 64..65536', { chunkSize });
  }
  const chunkCount = requireSize(m.chunk_count, 'meta.chunk_count', MAX_ELEMENT_COUNT, 'MAX_ELEMENT_COUNT', key);
  if (chunkCount !== Math.ceil(elementCount / chunkSize)) {
    mismatch(key, 'meta.chunk_count disagrees with element_count and chunk_size', { chunkCount, elementCount, chunkSize });
  }
  const escapeCount = requireSize(m.escape_count, 'meta.escape_count', elementCount, 'meta.element_count', key);
  const compBytes = requireSize(m.comp_bytes, 'meta.comp_bytes', MAX_BLOB_BYTES, 'MAX_BLOB_BYTES', key);
  const expectedCompBytes = computePayloadLayout(elementCount, escapeCount, chunkSize).totalBytes;
  if (compBytes !== expectedCompBytes) {
    mismatch(key, `meta.comp_bytes ${compBytes} disagrees with the payload layout (${expectedCompBytes})`, { compBytes, expectedCompBytes });
  }
  const rawBytes = requireSize(m.raw_bytes, 'meta.raw_bytes', MAX_RAW_BYTES, 'MAX_RAW_BYTES', key);
  if (rawBytes !== 2 * elementCount) mismatch(key, 'meta.raw_bytes must be 2 × element_count', { rawBytes, elementCount });
  const checksum = requireSize(m.checksum, 'meta.checksum', 0xffffffff, 'u32', key);
  return Object.freeze({ version: m.version, elementCount, chunkSize, chunkCount, escapeCount, compBytes, rawBytes, checksum });
}

/**
 * Validates an untrusted on-disk entry (manifest or journal) and returns the frozen CacheEntry;
 * `pool` (one per parse of many entries) shares the strings its bindings repeat.
 */
export function parseDiskEntry(key: string, value: unknown, pool?: StringPool): CacheEntry {
  if (!isContentKey(key)) {
    throw new StoreError('ENTRY_INVALID', 'entry key must be 40 lower-case hex digits', { entry: key, details: { key: detailValue(key) } });
  }
  const e = requireObject(value, 'entry', key);
  // First: the one field that names a file.
  const blob = validateBlobPath(key, e.blob);
  const qualname = e.qualname;
  if (typeof qualname !== 'string' || qualname.length > MAX_QUALNAME_CHARS) {
    mismatch(key, `qualname must be a string of at most ${MAX_QUALNAME_CHARS} characters`, { field: 'qualname' });
  }
  let codebook: CodebookJson;
  try {
    // The codec's own frozen copy, kept as is (decode knows it as checked), one per distinct list.
    const checked = codebookFromJson(e.codebook);
    codebook = pool ? pool.internCodebook(checked) : (checked as CodebookJson);
  } catch (error) {
    throw new StoreError('INVALID_CODEBOOK', `codebook fails validation: ${(error as Error).message}`, { entry: key, cause: error });
  }
  if (typeof e.format_version !== 'number' || !READABLE_PAYLOAD_VERSIONS.includes(e.format_version)) {
    throw new StoreError('UNSUPPORTED_PAYLOAD_VERSION', `format_version ${describeValue(e.format_version)} is not one of ${READABLE_PAYLOAD_VERSIONS.join(', ')}`, {
      entry: key,
      details: { formatVersion: detailValue(e.format_version) },
    });
  }
  const meta = parseMeta(key, e.meta);
  if (meta.version !== e.format_version) mismatch(key, 'format_version disagrees with meta.version', { formatVersion: detailValue(e.format_version), metaVersion: meta.version });
  const rawBytes = requireSize(e.raw_bytes, 'raw_bytes', MAX_RAW_BYTES, 'MAX_RAW_BYTES', key);
  const compBytes = requireSize(e.comp_bytes, 'comp_bytes', MAX_BLOB_BYTES, 'MAX_BLOB_BYTES', key);
  if (rawBytes !== meta.rawBytes) mismatch(key, 'raw_bytes disagrees with meta.raw_bytes', { rawBytes, metaRawBytes: meta.rawBytes });
  if (compBytes !== meta.compBytes) mismatch(key, 'comp_bytes disagrees with meta.comp_bytes', { compBytes, metaCompBytes: meta.compBytes });
  if (e.dtype !== 'BF16') mismatch(key, `dtype must be "BF16", got ${describeValue(e.dtype)}`, { dtype: detailValue(e.dtype) });
  let elementCount: number;
  try {
    elementCount = countShapeElements(e.shape as number[], { entry: key });
  } catch (error) {
    throw new StoreError('ENTRY_INVALID', (error as StoreError).reason ?? String(error), { entry: key, cause: error });
  }
  if (elementCount !== meta.elementCount) {
    mismatch(key, 'shape disagrees with meta.element_count', { shape: detailValue(e.shape), elementCount: meta.elementCount });
  }
  if (typeof e.blob_checksum !== 'string' || !BLOB_CHECKSUM_PATTERN.test(e.blob_checksum)) {
    mismatch(key, 'blob_checksum must be "xxh32:" and 8 hex digits', { blobChecksum: detailValue(e.blob_checksum) });
  }
  if (e.blob_checksum !== formatBlobChecksum(meta.checksum)) {
    mismatch(key, 'blob_checksum disagrees with meta.checksum', { blobChecksum: e.blob_checksum, metaChecksum: meta.checksum });
  }
  if (e.blob_sha256 !== undefined && !isSha256Hex(e.blob_sha256)) {
    mismatch(key, 'blob_sha256 must be 64 lower-case hex digits when present', { field: 'blob_sha256' });
  }
  if (e.sha256 !== undefined && !isSha256Hex(e.sha256)) mismatch(key, 'sha256 must be 64 lower-case hex digits when present', { field: 'sha256' });
  const rawSliceKeys = e.slice_keys === undefined ? [] : e.slice_keys;
  if (!Array.isArray(rawSliceKeys) || rawSliceKeys.length > MAX_SLICE_KEYS_PER_ENTRY) {
    mismatch(key, `slice_keys must be an array of at most ${MAX_SLICE_KEYS_PER_ENTRY} slice keys`, { field: 'slice_keys' });
  }
  // Most entries have one slice key: no set of them to check for a repeat.
  const seen = rawSliceKeys.length > 1 ? new Set<string>() : undefined;
  const sliceKeys: SliceKeyTuple[] = [];
  for (const raw of rawSliceKeys as unknown[]) {
    const slice = validateSliceKey(raw, key, 'ENTRY_INVALID', pool);
    if (slice[2] !== rawBytes) {
      throw new StoreError('SLICE_SIZE_MISMATCH', `slice ${JSON.stringify(slice)} has ${slice[2]} bytes, the entry ${rawBytes}`, {
        entry: key,
        details: { slice, rawBytes },
      });
    }
    if (seen) {
      const id = sliceId(...slice);
      if (seen.has(id)) mismatch(key, `slice_keys lists ${JSON.stringify(slice)} twice`, { slice });
      seen.add(id);
    }
    sliceKeys.push(slice);
  }
  return Object.freeze({
    key,
    qualname: qualname as string,
    blob,
    codebook,
    meta,
    rawBytes,
    compBytes,
    dtype: 'BF16' as const,
    shape: Object.freeze([...(e.shape as number[])]),
    formatVersion: meta.version,
    blobChecksum: e.blob_checksum as string,
    blobSha256: e.blob_sha256 === undefined ? null : (e.blob_sha256 as string),
    sha256: e.sha256 === undefined ? null : (e.sha256 as string),
    sliceKeys: Object.freeze(sliceKeys),
  });
}

/** The on-disk form of an entry (field order: the seed's fields first). */
export function entryToDisk(entry: CacheEntry): DiskEntry {
  const m = entry.meta;
  return {
    qualname: entry.qualname,
    blob: entry.blob,
    codebook: { exponents: [...entry.codebook.exponents] },
    meta: {
      version: m.version,
      element_count: m.elementCount,
      chunk_size: m.chunkSize,
      chunk_count: m.chunkCount,
      escape_count: m.escapeCount,
      comp_bytes: m.compBytes,
      raw_bytes: m.rawBytes,
      checksum: m.checksum,
    },
    raw_bytes: entry.rawBytes,
    // The seed reads the first three; the stamps, where any were recorded, follow them.
    slice_keys: entry.sliceKeys.map((s) => (s[3] === undefined ? [s[0], s[1], s[2]] : [s[0], s[1], s[2], [...s[3]]])),
    dtype: entry.dtype,
    shape: [...entry.shape],
    format_version: entry.formatVersion,
    comp_bytes: entry.compBytes,
    blob_checksum: entry.blobChecksum,
    ...(entry.blobSha256 === null ? {} : { blob_sha256: entry.blobSha256 }),
    ...(entry.sha256 === null ? {} : { sha256: entry.sha256 }),
  };
}

/** A slice key without its stamps. */
export function withoutStamps(slice: SliceKeyTuple): SliceKeyTuple {
  return slice[3] === undefined ? slice : Object.freeze([slice[0], slice[1], slice[2]] as const);
}

/** A copy of `entry` with different slice keys (entries are immutable snapshots). */
export function withSliceKeys(entry: CacheEntry, sliceKeys: readonly SliceKeyTuple[]): CacheEntry {
  return Object.freeze({ ...entry, sliceKeys: Object.freeze([...sliceKeys]) });
}
