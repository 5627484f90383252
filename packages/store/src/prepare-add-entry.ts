import { readPayloadMeta, verifyPayloadChecksum } from '@splitzip/codec';
import { countShapeElements } from './compute-content-key.js';
import { checkAddEntryFields } from './check-options.js';
import { digestHex } from './hash-bytes.js';
import { describeValue } from './describe-value.js';
import { StoreError } from './errors.js';
import { MAX_QUALNAME_CHARS, MAX_SLICE_KEYS_PER_ENTRY } from './limits.js';
import type { AddEntryInput, CacheEntry, PayloadDigest } from './types.js';
import { canonicalBlobPath, formatBlobChecksum, isContentKey, isSha256Hex, sliceId, validateSliceKey } from './validate-entry.js';

export interface PreparedEntry {
  entry: CacheEntry;
  /** The payload's bytes up to its total size (what the blob holds). */
  payload: Uint8Array;
  /** AddEntryInput.onPayloadWritten, checked to be a function. */
  onPayloadWritten: (() => void) | undefined;
}

function sha256Hex(bytes: Uint8Array): string {
  return digestHex('sha256', bytes);
}

/**
 * Validates an addEntry input (payload header and checksum, shape, slices) and builds its entry.
 * Shared by both stores; `requireBlobSha256` (the S3 store, whose object names carry it) records
 * the blob's SHA-256 even when the input says not to.
 */

export function prepareAddEntry(input: AddEntryInput, options: { requireBlobSha256?: boolean } = {}): PreparedEntry {
  if (input === null || typeof input !== 'object') throw new StoreError('INVALID_ARGUMENT', 'addEntry input must be an object');
  checkAddEntryFields(input);
  const { key, qualname, payload, shape, dtype, sha256 } = input;
  if (!isContentKey(key)) throw new StoreError('INVALID_ARGUMENT', 'key must be 40 lower-case hex digits (computeContentKey)', { details: { key } });
  if (typeof qualname !== 'string' || qualname.length > MAX_QUALNAME_CHARS) {
    throw new StoreError('INVALID_ARGUMENT', `qualname must be a string of at most ${MAX_QUALNAME_CHARS} characters`, { entry: key });
  }
  if (dtype !== 'BF16') throw new StoreError('INVALID_ARGUMENT', `only BF16 tensors are cached, got ${describeValue(dtype)}`, { entry: key });
  if (sha256 != null && !isSha256Hex(sha256)) {
    throw new StoreError('INVALID_ARGUMENT', 'sha256 must be 64 lower-case hex digits when given', { entry: key });
  }
  if (!(payload instanceof Uint8Array)) throw new StoreError('INVALID_ARGUMENT', 'payload must be a Uint8Array', { entry: key });
  let meta;
  try {
    meta = readPayloadMeta(payload);
    verifyPayloadChecksum(payload, meta);
  } catch (error) {
    throw new StoreError('INVALID_ARGUMENT', `payload fails validation: ${(error as Error).message}`, { entry: key, cause: error });
  }
  const elementCount = countShapeElements(shape, { entry: key });
  if (elementCount !== meta.elementCount) {
    throw new StoreError('INVALID_ARGUMENT', `shape holds ${elementCount} values, the payload ${meta.elementCount}`, {
      entry: key,
      details: { shape: [...shape], payloadElements: meta.elementCount },
    });
  }
  const rawSliceKeys: unknown = input.sliceKeys ?? [];
  if (!Array.isArray(rawSliceKeys)) throw new StoreError('INVALID_ARGUMENT', 'sliceKeys must be an array of slice keys', { entry: key });
  // Array.from, not map: map skips an array's holes, and a hole then failed below as a TypeError.
  const sliceKeys = Array.from(rawSliceKeys as unknown[], (s) => validateSliceKey(s, key, 'INVALID_ARGUMENT'));
  if (sliceKeys.length > MAX_SLICE_KEYS_PER_ENTRY) {
    // SIZE_INVALID, as an alias past the limit is (callers tell the two cases by that code).
    throw new StoreError('SIZE_INVALID', `more than MAX_SLICE_KEYS_PER_ENTRY (${MAX_SLICE_KEYS_PER_ENTRY}) slice keys`, {
      entry: key,
      details: { limit: MAX_SLICE_KEYS_PER_ENTRY, sliceKeys: sliceKeys.length },
    });
  }
  const ids = new Set<string>();
  for (const slice of sliceKeys) {
    if (slice[2] !== meta.rawBytes) {
      throw new StoreError('SLICE_SIZE_MISMATCH', `slice ${JSON.stringify(slice)} has ${slice[2]} bytes but the tensor ${meta.rawBytes}`, {
        entry: key,
        details: { slice, rawBytes: meta.rawBytes },
      });
    }
    const id = sliceId(...slice);
    if (ids.has(id)) throw new StoreError('INVALID_ARGUMENT', `slice ${JSON.stringify(slice)} is listed twice`, { entry: key });
    ids.add(id);
  }
  const { onPayloadWritten } = input;
  if (onPayloadWritten !== undefined && typeof onPayloadWritten !== 'function') {
    throw new StoreError('INVALID_ARGUMENT', 'onPayloadWritten must be a function', { entry: key });
  }
  const blobBytes = payload.subarray(0, meta.compBytes);
  let blobSha256: string | null;
  if (input.payloadDigest !== undefined) blobSha256 = acceptPayloadDigest(input.payloadDigest, meta, key);
  else if (input.recordBlobSha256 === false && !options.requireBlobSha256) blobSha256 = null;
  else blobSha256 = sha256Hex(blobBytes);
  const entry: CacheEntry = Object.freeze({
    key,
    qualname,
    blob: canonicalBlobPath(key),
    codebook: Object.freeze({ exponents: Object.freeze([...meta.codebook.exponents]) as number[] }),
    meta: Object.freeze({
      version: meta.version,
      elementCount: meta.elementCount,
      chunkSize: meta.chunkSize,
      chunkCount: meta.chunkCount,
      escapeCount: meta.escapeCount,
      compBytes: meta.compBytes,
      rawBytes: meta.rawBytes,
      checksum: meta.checksum,
    }),
    rawBytes: meta.rawBytes,
    compBytes: meta.compBytes,
    dtype: 'BF16' as const,
    shape: Object.freeze([...shape]),
    formatVersion: meta.version,
    blobChecksum: formatBlobChecksum(meta.checksum),
    blobSha256,
    sha256: sha256 ?? null,
    sliceKeys: Object.freeze(sliceKeys),
  });
  return { entry, payload: blobBytes, onPayloadWritten };
}

/**
 * A caller's digest of this payload's blob, once it names the payload just validated: the XXH32
 * covers every byte, so equal checksum and length mean the caller hashed these bytes (a digest of
 * any other range or payload is refused, up to XXH32's 2^-32 collisions, and verify re-hashes).
 */
function acceptPayloadDigest(digest: PayloadDigest, meta: { checksum: number; compBytes: number }, key: string): string {
  if (digest === null || typeof digest !== 'object' || !isSha256Hex(digest.sha256)) {
    throw new StoreError('INVALID_ARGUMENT', 'payloadDigest.sha256 must be 64 lower-case hex digits', { entry: key });
  }
  if (digest.checksum !== meta.checksum || digest.compBytes !== meta.compBytes) {
    throw new StoreError(
      'INVALID_ARGUMENT',
      `payloadDigest names other bytes (checksum ${String(digest.checksum)}, ${String(digest.compBytes)} bytes) than the payload given (checksum ${meta.checksum}, ${meta.compBytes} bytes)`,
      { entry: key, details: { digestChecksum: digest.checksum, digestCompBytes: digest.compBytes, checksum: meta.checksum, compBytes: meta.compBytes } },
    );
  }
  return digest.sha256;
}
