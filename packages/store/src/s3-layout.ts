import { StoreError } from './errors.js';
import { MAX_SLICE_OFFSET_BYTES, MAX_SLICE_STAMP_CHARS } from './limits.js';
import { shardStampKind } from './shard-stamp-kind.js';
import type { CacheEntry, SliceKeyTuple } from './types.js';
import { sliceId } from './validate-entry.js';

/** `s3://bucket/prefix` split into its parts; `prefix` is '' or ends with '/'. */
export interface S3Location {
  bucket: string;
  prefix: string;
  url: string;
}

/**
 * S3 object keys are at most 1024 bytes; a slice object's key holds the shard name in base64url
 * (4/3 of its UTF-8 bytes) next to the prefix, offset, size, epoch and content key (~100 bytes).
 */
export const MAX_S3_SHARD_NAME_BYTES = 512;
/** The cache prefix leaves room for the longest object key below it (1024 bytes in all). */
export const MAX_S3_PREFIX_BYTES = 200;
/** Rebinds of one slice; the epoch is written with this many digits so that names sort by it. */
export const SLICE_EPOCH_DIGITS = 10;
export const MAX_SLICE_EPOCH = 10 ** SLICE_EPOCH_DIGITS - 1;

const BUCKET_PATTERN = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function isS3Url(root: string): boolean {
  return typeof root === 'string' && root.startsWith('s3://');
}

/** A scheme of two or more characters then `:/`: `S3://b/p`, `s3:/b/p`, `gs://b` (a drive letter `C:/` is not one). */
const URL_LIKE = /^[A-Za-z][A-Za-z0-9+.-]+:\//;

/**
 * Whether a location that is not an `s3://` URL still looks like a URL (a mistyped `S3://` or
 * `s3:/`, another scheme): as a local path it would silently name a directory `./S3:/…`.
 */
export function looksLikeOtherUrl(location: string): boolean {
  return typeof location === 'string' && !isS3Url(location) && URL_LIKE.test(location);
}

/** Parses `s3://bucket[/prefix]`. */
export function parseS3Url(url: string): S3Location {
  const rest = url.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  if (!BUCKET_PATTERN.test(bucket)) {
    throw new StoreError('INVALID_ARGUMENT', `bucket name ${JSON.stringify(bucket)} is not a valid S3 bucket name`, { path: url });
  }
  const parts = (slash < 0 ? '' : rest.slice(slash + 1)).split('/').filter((p) => p.length > 0);
  if (parts.some((p) => p === '.' || p === '..' || p.includes('\0'))) {
    throw new StoreError('INVALID_ARGUMENT', 'the S3 prefix must not contain ".", ".." or NUL parts', { path: url });
  }
  const prefix = parts.length === 0 ? '' : `${parts.join('/')}/`;
  if (Buffer.byteLength(prefix) > MAX_S3_PREFIX_BYTES) {
    throw new StoreError('INVALID_ARGUMENT', `the S3 prefix is longer than MAX_S3_PREFIX_BYTES (${MAX_S3_PREFIX_BYTES})`, { path: url });
  }
  return { bucket, prefix, url: `s3://${bucket}/${prefix}` };
}

/** Relative names below the prefix (the README's S3 layout). */
export const HEADER_OBJECT = 'cache.json';
export const BLOBS_DIR = 'blobs/';
export const ENTRIES_DIR = 'entries/';
export const SLICES_DIR = 'slices/';
export const STAMPS_DIR = 'stamps/';
/** A dropUnboundEntries run's intent objects (README "S3 layout", Removing entries). */
export const DROPPING_DIR = 'dropping/';

/** S3's limit on an object key (the prefix included), in UTF-8 bytes. */
export const S3_MAX_OBJECT_KEY_BYTES = 1024;
/** Characters of base64url (unpadded) for `bytes` bytes. */
function base64urlChars(bytes: number): number {
  return Math.ceil((bytes * 4) / 3);
}
/** A stamp object's key less its stamp, at its longest: prefix, `stamps/`, shard, `/<offset>-<size>/`, key and `.`. */
const LONGEST_STAMP_OBJECT_KEY_BEFORE_STAMP =
  MAX_S3_PREFIX_BYTES + STAMPS_DIR.length + base64urlChars(MAX_S3_SHARD_NAME_BYTES) + 1 + 2 * String(MAX_SLICE_OFFSET_BYTES).length + 2 + 40 + 1;
/**
 * An object stamp of at most this many UTF-8 bytes fits every stamp object's key (the longest
 * prefix, shard name and offsets leave 43): enough for a single-part ETag (`etag:"<32 hex>"`, 39
 * bytes) and a multipart one of up to 999 parts. A longer stamp (up to MAX_SLICE_STAMP_CHARS) is
 * stored where its actual key fits S3_MAX_OBJECT_KEY_BYTES, else refused (INVALID_ARGUMENT).
 */
export const MAX_S3_STAMP_BYTES = Math.floor(((S3_MAX_OBJECT_KEY_BYTES - LONGEST_STAMP_OBJECT_KEY_BEFORE_STAMP) * 3) / 4);

/** A blob is named by its content key and the SHA-256 of its bytes: two encodings of one tensor never share a name. */
/**
 * An S3 cache entry's blob SHA-256, which its object names carry. Never null there: entries are
 * either made by this store (prepareAddEntry with requireBlobSha256) or read from an entry object
 * whose name must carry the same digest; a null here is a bug, reported as an invalid entry.
 */
export function blobSha256Of(entry: Pick<CacheEntry, 'key' | 'blobSha256'>): string {
  if (entry.blobSha256 === null) throw new StoreError('ENTRY_INVALID', 'an S3 cache entry needs its blob_sha256', { entry: entry.key });
  return entry.blobSha256;
}

export function blobObjectName(key: string, blobSha256: string): string {
  return `${BLOBS_DIR}${key}.${blobSha256}.bin`;
}

export function entryObjectName(key: string, blobSha256: string): string {
  return `${ENTRIES_DIR}${key}.${blobSha256}.json`;
}

/**
 * A drop's intent object for one entry object: `dropping/<key>.<blob_sha256>.json.<dropId>`, its
 * body the entry object's bytes, PUT before the entry object's DELETE and deleted once the drop has
 * put the entry back or judged its blob; `dropId` is random per drop run (DROP_ID_HEX_CHARS hex).
 */
export function dropIntentObjectName(entryName: string, dropId: string): string {
  return `${DROPPING_DIR}${entryName.slice(ENTRIES_DIR.length)}.${dropId}`;
}

/** Every intent object of one entry object lies below this (any drop's). */
export function dropIntentPrefix(entryName: string): string {
  return `${DROPPING_DIR}${entryName.slice(ENTRIES_DIR.length)}.`;
}

/** Hex characters of a drop run's id: 48 random bits, no two concurrent drops share one. */
export const DROP_ID_HEX_CHARS = 12;

const INTENT_NAME = /^dropping\/([0-9a-f]{40})\.([0-9a-f]{64})\.json\.([0-9a-f]{12})$/;

/** Parses an intent object's name; undefined for a name this package did not write. */
export function parseDropIntentObjectName(name: string): { key: string; blobSha256: string; entryName: string; dropId: string } | undefined {
  const m = INTENT_NAME.exec(name);
  return m ? { key: m[1]!, blobSha256: m[2]!, entryName: entryObjectName(m[1]!, m[2]!), dropId: m[3]! } : undefined;
}

const ENTRY_NAME = /^entries\/([0-9a-f]{40})\.([0-9a-f]{64})\.json$/;
const BLOB_NAME = /^blobs\/([0-9a-f]{40})\.([0-9a-f]{64})\.bin$/;
const SLICE_NAME = /^slices\/([A-Za-z0-9_-]+)\/(0|[1-9][0-9]{0,15})-(0|[1-9][0-9]{0,15})\/([0-9]{10})\.([0-9a-f]{40})$/;
const STAMP_NAME = /^stamps\/([A-Za-z0-9_-]+)\/(0|[1-9][0-9]{0,15})-(0|[1-9][0-9]{0,15})\/([0-9a-f]{40})\.([A-Za-z0-9_-]+)$/;

export function parseEntryObjectName(name: string): { key: string; blobSha256: string } | undefined {
  const m = ENTRY_NAME.exec(name);
  return m ? { key: m[1]!, blobSha256: m[2]! } : undefined;
}

export function parseBlobObjectName(name: string): { key: string; blobSha256: string } | undefined {
  const m = BLOB_NAME.exec(name);
  return m ? { key: m[1]!, blobSha256: m[2]! } : undefined;
}

export function encodeShardName(shardName: string): string {
  const bytes = Buffer.from(shardName, 'utf8');
  if (bytes.length > MAX_S3_SHARD_NAME_BYTES) {
    throw new StoreError('INVALID_ARGUMENT', `shard name is ${bytes.length} UTF-8 bytes; S3 caches allow MAX_S3_SHARD_NAME_BYTES (${MAX_S3_SHARD_NAME_BYTES})`, {
      details: { shardName: shardName.slice(0, 100) },
    });
  }
  return bytes.toString('base64url');
}

/** `slices/<base64url shard>/<offset>-<size>/` — every alias object of one slice lies below it. */
export function sliceDirName(slice: SliceKeyTuple): string {
  return `${SLICES_DIR}${encodeShardName(slice[0])}/${slice[1]}-${slice[2]}/`;
}

/** One alias: the slice, the epoch (rebinds count up) and the entry key, all in the name; the body is empty. */
export function sliceObjectName(slice: SliceKeyTuple, epoch: number, key: string): string {
  return `${sliceDirName(slice)}${String(epoch).padStart(SLICE_EPOCH_DIGITS, '0')}.${key}`;
}

export interface ParsedSliceObject {
  slice: SliceKeyTuple;
  epoch: number;
  key: string;
}

/** Decodes canonical base64url of a non-empty UTF-8 text without NUL; undefined otherwise (base64url decoding is lenient). */
function decodeCanonical(encoded: string): string | undefined {
  const text = Buffer.from(encoded, 'base64url').toString('utf8');
  if (text.length === 0 || text.includes('\0') || Buffer.from(text, 'utf8').toString('base64url') !== encoded) return undefined;
  return text;
}

/** The slice of a `<base64url shard>/<offset>-<size>` directory; undefined for one this package did not write. */
function parseSliceDir(encodedShard: string, offset: string, size: string): SliceKeyTuple | undefined {
  const shardName = decodeCanonical(encodedShard);
  if (shardName === undefined) return undefined;
  const offsetBytes = Number(offset);
  const sizeBytes = Number(size);
  if (offsetBytes > MAX_SLICE_OFFSET_BYTES || sizeBytes > MAX_SLICE_OFFSET_BYTES) return undefined;
  return Object.freeze([shardName, offsetBytes, sizeBytes] as const);
}

/** Parses an alias object's name; undefined for a name this package did not write. */
export function parseSliceObjectName(name: string): ParsedSliceObject | undefined {
  const m = SLICE_NAME.exec(name);
  if (!m) return undefined;
  const slice = parseSliceDir(m[1]!, m[2]!, m[3]!);
  return slice === undefined ? undefined : { slice, epoch: Number(m[4]), key: m[5]! };
}

/** `stamps/<base64url shard>/<offset>-<size>/` — every stamp object of one slice lies below it. */
export function stampDirName(slice: SliceKeyTuple): string {
  return `${STAMPS_DIR}${encodeShardName(slice[0])}/${slice[1]}-${slice[2]}/`;
}

/**
 * One object stamp recorded with a binding of the slice to `key`: everything in the name, the body
 * empty. Only object stamps are stored (a file stamp describes one host's file); a stamp that would
 * make the key longer than S3_MAX_OBJECT_KEY_BYTES below `prefix` is INVALID_ARGUMENT.
 */
export function stampObjectName(slice: SliceKeyTuple, key: string, stamp: string, prefix: string): string {
  const name = `${stampDirName(slice)}${key}.${Buffer.from(stamp, 'utf8').toString('base64url')}`;
  const keyBytes = Buffer.byteLength(prefix) + Buffer.byteLength(name);
  if (keyBytes > S3_MAX_OBJECT_KEY_BYTES) {
    throw new StoreError(
      'INVALID_ARGUMENT',
      `stamp ${JSON.stringify(stamp.slice(0, 80))} makes its stamp object's key ${keyBytes} bytes, above S3_MAX_OBJECT_KEY_BYTES (${S3_MAX_OBJECT_KEY_BYTES}); stamps of at most MAX_S3_STAMP_BYTES (${MAX_S3_STAMP_BYTES}) always fit`,
      { entry: key, details: { slice: [slice[0].slice(0, 100), slice[1], slice[2]], keyBytes, limit: S3_MAX_OBJECT_KEY_BYTES } },
    );
  }
  return name;
}

export interface ParsedStampObject {
  slice: SliceKeyTuple;
  key: string;
  stamp: string;
}

/** Parses a stamp object's name; undefined for a name this package did not write (an invalid or non-object stamp included). */
export function parseStampObjectName(name: string): ParsedStampObject | undefined {
  const m = STAMP_NAME.exec(name);
  if (!m) return undefined;
  const slice = parseSliceDir(m[1]!, m[2]!, m[3]!);
  const stamp = decodeCanonical(m[5]!);
  if (slice === undefined || stamp === undefined || stamp.length > MAX_SLICE_STAMP_CHARS || shardStampKind(stamp) !== 'object') return undefined;
  return { slice, key: m[4]!, stamp };
}

/** The keys at a slice's highest alias epoch (one binds it; two or more are a conflict), per slice id. */
export function topAliasKeys(names: Iterable<string>): Map<string, { slice: SliceKeyTuple; epoch: number; keys: Set<string> }> {
  const top = new Map<string, { slice: SliceKeyTuple; epoch: number; keys: Set<string> }>();
  for (const name of names) {
    const parsed = parseSliceObjectName(name);
    if (!parsed) continue;
    const id = sliceId(...parsed.slice);
    const at = top.get(id);
    if (!at || parsed.epoch > at.epoch) top.set(id, { slice: parsed.slice, epoch: parsed.epoch, keys: new Set([parsed.key]) });
    else if (parsed.epoch === at.epoch) at.keys.add(parsed.key);
  }
  return top;
}
