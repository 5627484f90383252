import { StoreError } from './errors.js';
import { MAX_SLICE_OFFSET_BYTES } from './limits.js';
import type { CacheEntry, SliceKeyTuple } from './types.js';

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

const ENTRY_NAME = /^entries\/([0-9a-f]{40})\.([0-9a-f]{64})\.json$/;
const BLOB_NAME = /^blobs\/([0-9a-f]{40})\.([0-9a-f]{64})\.bin$/;
const SLICE_NAME = /^slices\/([A-Za-z0-9_-]+)\/(0|[1-9][0-9]{0,15})-(0|[1-9][0-9]{0,15})\/([0-9]{10})\.([0-9a-f]{40})$/;

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

/** Parses an alias object's name; undefined for a name this package did not write. */
export function parseSliceObjectName(name: string): ParsedSliceObject | undefined {
  const m = SLICE_NAME.exec(name);
  if (!m) return undefined;
  const shardName = Buffer.from(m[1]!, 'base64url').toString('utf8');
  // base64url decoding is lenient: accept only the canonical encoding of a non-empty name.
  if (shardName.length === 0 || shardName.includes('\0') || Buffer.from(shardName, 'utf8').toString('base64url') !== m[1]) return undefined;
  const offsetBytes = Number(m[2]);
  const sizeBytes = Number(m[3]);
  if (offsetBytes > MAX_SLICE_OFFSET_BYTES || sizeBytes > MAX_SLICE_OFFSET_BYTES) return undefined;
  return { slice: Object.freeze([shardName, offsetBytes, sizeBytes] as const), epoch: Number(m[4]), key: m[5]! };
}
