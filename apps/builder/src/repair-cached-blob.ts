import { convertPayloadVersion, createCodebook, encode, readPayloadMeta } from '@splitzip/codec';
import { BLOB_DAMAGE_CODES, isS3Url, isStoreError, type CacheEntry, type CacheStore } from '@splitzip/store';
import { viewBf16 } from './tensor-tasks.js';

/**
 * `build --repair` for a tensor whose entry is already cached: reads its blob with every check the
 * store makes; when the blob is missing or damaged, encodes the tensor again with the entry's own
 * codebook, chunk size and format version (the encoder is deterministic, so these are the bytes the
 * entry was committed with) and has the store put them back. `scratch` holds the read when it is
 * large enough (the tensor's slab room).
 */
export async function repairCachedBlob(store: CacheStore, entry: CacheEntry, bytes: Uint8Array, scratch: Uint8Array): Promise<BlobRepair> {
  // An s3:// store answers readBlob from an entry's inline copy or this host's read-through copy
  // when it has one, so a damaged object can read as intact: there the tensor is always encoded
  // again, and repairBlob compares it with the object itself (writing only when they differ).
  let was: BlobRepair['was'] = null;
  if (!isS3Url(store.root)) {
    const slot = scratch.byteLength >= entry.compBytes ? scratch.subarray(0, entry.compBytes) : new Uint8Array(entry.compBytes);
    try {
      await store.readBlob(entry.key, slot);
      return NOT_REPAIRED;
    } catch (error) {
      if (!(isStoreError(error) && BLOB_DAMAGE_CODES.has(error.code))) throw error;
      // A blob that is not there is not damaged: the report counts the two apart.
      was = error.code === 'BLOB_MISSING' ? 'missing' : 'damaged';
    }
  }
  return putBackBlob(store, entry, bytes, was);
}

/**
 * Encodes the tensor `bytes` (whose content key is the entry's) again with the entry's own codebook,
 * chunk size and format version, and has the store put the blob back (store.repairBlob: it refuses
 * any other bytes, writes atomically under the writer lock, and writes nothing where the stored
 * blob is intact).
 */
export async function putBackBlob(store: CacheStore, entry: CacheEntry, bytes: Uint8Array, was: BlobRepair['was']): Promise<BlobRepair> {
  let payload: Uint8Array = encode(viewBf16(bytes), createCodebook(entry.codebook.exponents), { chunkSize: entry.meta.chunkSize });
  if (entry.meta.version !== readPayloadMeta(payload).version) payload = convertPayloadVersion(payload, entry.meta.version);
  return (await store.repairBlob(entry.key, payload)) ? { bytes: payload.byteLength, was } : NOT_REPAIRED;
}

export interface BlobRepair {
  /** Payload bytes written: 0 when the blob was intact (nothing written). */
  bytes: number;
  /**
   * What was wrong with the blob put back: `missing` (BLOB_MISSING), `damaged` (any other of
   * BLOB_DAMAGE_CODES: its size, checksum or meta, a link or a directory in its place); null when
   * nothing was put back, or by `--repair` on s3://, where the object is compared, not read with
   * the checks.
   */
  was: 'missing' | 'damaged' | null;
}

export const NOT_REPAIRED: BlobRepair = { bytes: 0, was: null };
