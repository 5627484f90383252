import { readPayloadMeta, verifyPayloadChecksum, type PayloadMeta } from '@splitzip/codec';
import { StoreError } from './errors.js';
import type { CacheEntry } from './types.js';

/** BLOB_CORRUPT for a codec error (`details.codecCode`, `cause`). */
export function blobCorruptError(entry: CacheEntry, message: string, error: unknown): StoreError {
  const codecCode = (error as { code?: unknown })?.code;
  return new StoreError('BLOB_CORRUPT', `${message}: ${(error as Error).message}`, {
    entry: entry.key,
    details: { codecCode },
    cause: error,
  });
}

/**
 * Checks a blob read from disk before anyone decodes it: a valid header (codec reader rules), an
 * intact checksum (BLOB_CORRUPT otherwise), then every header field equal to the manifest's
 * (META_MISMATCH otherwise: an intact payload of another tensor). With `checksum: false` the
 * content checksum is left to the caller (a decoder that verifies it in the same pass).
 */
export function checkBlobPayload(entry: CacheEntry, payload: Uint8Array, options: { checksum?: boolean } = {}): PayloadMeta {
  let meta: PayloadMeta;
  try {
    meta = readPayloadMeta(payload);
  } catch (error) {
    throw blobCorruptError(entry, 'blob header is invalid', error);
  }
  if (options.checksum !== false) {
    try {
      verifyPayloadChecksum(payload, meta);
    } catch (error) {
      throw blobCorruptError(entry, 'blob checksum fails', error);
    }
  }
  checkMetaAgainstEntry(entry, meta);
  return meta;
}

/** META_MISMATCH unless every header field of a blob (`meta`) equals the manifest's: an intact payload of another tensor. */
export function checkMetaAgainstEntry(entry: CacheEntry, meta: PayloadMeta): void {
  const expected = entry.meta;
  const pairs: [string, unknown, unknown][] = [
    ['version', expected.version, meta.version],
    ['elementCount', expected.elementCount, meta.elementCount],
    ['chunkSize', expected.chunkSize, meta.chunkSize],
    ['chunkCount', expected.chunkCount, meta.chunkCount],
    ['escapeCount', expected.escapeCount, meta.escapeCount],
    ['compBytes', expected.compBytes, meta.compBytes],
    ['rawBytes', expected.rawBytes, meta.rawBytes],
    ['checksum', expected.checksum, meta.checksum],
    ['codebook', entry.codebook.exponents.join(','), meta.codebook.exponents.join(',')],
  ];
  for (const [field, manifest, blob] of pairs) {
    if (manifest !== blob) {
      throw new StoreError('META_MISMATCH', `blob header ${field} is ${String(blob)}, the manifest says ${String(manifest)}`, {
        entry: entry.key,
        details: { field, manifest, blob },
      });
    }
  }
}
