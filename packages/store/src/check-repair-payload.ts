import { checkBlobPayload } from './check-blob-payload.js';
import { digestHex } from './hash-bytes.js';
import { StoreError, isStoreError } from './errors.js';
import type { CacheEntry } from './types.js';

/** The codes of a blob that is missing or damaged: what repairBlob can put right. */
export const BLOB_DAMAGE_CODES: ReadonlySet<string> = new Set(['BLOB_MISSING', 'BLOB_SIZE_MISMATCH', 'BLOB_CORRUPT', 'META_MISMATCH', 'UNSAFE_BLOB_PATH']);

/** The entry a repair of `key` puts back, its payload checked (checkRepairPayload); ENTRY_NOT_FOUND for an unknown key. */
export function entryToRepair(entries: ReadonlyMap<string, CacheEntry>, key: string, payload: Uint8Array, root: string): CacheEntry {
  const entry = entries.get(key);
  if (!entry) throw new StoreError('ENTRY_NOT_FOUND', 'no entry with this key', { entry: key, path: root });
  checkRepairPayload(entry, payload);
  return entry;
}

/**
 * Refuses (INVALID_ARGUMENT) a payload that is not exactly the blob `entry` describes: its size,
 * header, checksum and every meta field, and its SHA-256 where the entry recorded one. A repair
 * then rewrites the very bytes the entry was committed with, so every reader's checks still hold.
 */
export function checkRepairPayload(entry: CacheEntry, payload: Uint8Array): void {
  if (!(payload instanceof Uint8Array)) throw new StoreError('INVALID_ARGUMENT', 'a repair payload is a Uint8Array', { entry: entry.key });
  try {
    if (payload.byteLength !== entry.compBytes) {
      throw new StoreError('BLOB_SIZE_MISMATCH', `payload holds ${payload.byteLength} bytes, the entry ${entry.compBytes}`, { entry: entry.key });
    }
    checkBlobPayload(entry, payload);
    if (entry.blobSha256 !== null && digestHex('sha256', payload) !== entry.blobSha256) {
      throw new StoreError('BLOB_CORRUPT', 'payload SHA-256 differs from the entry blob_sha256', { entry: entry.key });
    }
  } catch (error) {
    const reason = isStoreError(error) ? error.reason : (error as Error).message;
    throw new StoreError('INVALID_ARGUMENT', `the payload is not the blob of entry ${entry.key}: ${reason}`, { entry: entry.key, cause: error });
  }
}

/**
 * Whether the stored blob already holds `payload` (checked by checkRepairPayload to be exactly the
 * entry's blob): `read` fills a view of compBytes with the stored bytes, or throws one of
 * BLOB_DAMAGE_CODES for a blob missing, short, or not a plain file (then false). Comparing with the
 * verified payload needs no second checksum or SHA-256 of the stored bytes.
 */
export async function storedBlobMatches(entry: CacheEntry, payload: Uint8Array, read: (view: Uint8Array) => Promise<void>): Promise<boolean> {
  const view = new Uint8Array(entry.compBytes);
  try {
    await read(view);
  } catch (error) {
    if (isStoreError(error) && BLOB_DAMAGE_CODES.has(error.code)) return false;
    throw error;
  }
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength).equals(payload);
}
