import { digestHex } from './hash-bytes.js';
import { checkBlobPayload } from './check-blob-payload.js';
import { formatContentKeyPrefix } from './compute-content-key.js';
import { hashDecodedBlocks, VERIFY_DECODE_BLOCK_BYTES, type DecodedDigests, type DecodedTensorInfo } from './hash-decoded-blocks.js';
import type { VerifyBackend } from './blob-range-reader.js';
import { checkBlobInPieces } from './verify-blob-in-pieces.js';
import { StoreError } from './errors.js';
import { MAX_BUFFER_BYTES, VERIFY_WHOLE_BLOB_MAX_BYTES } from './limits.js';
import type { CacheEntry, VerifyOptions, VerifyProblem, VerifyReport } from './types.js';

/** Refuses, as a problem of the entry, a buffer this Node.js cannot allocate (Invalid typed array length). */
function requireBuffer(entry: CacheEntry, what: string, bytes: number): void {
  if (bytes > MAX_BUFFER_BYTES) {
    throw new StoreError('SIZE_INVALID', `the ${what} needs ${bytes} bytes, above the largest buffer this Node.js allocates (MAX_BUFFER_BYTES, ${MAX_BUFFER_BYTES})`, {
      entry: entry.key,
      details: { bytes, limit: MAX_BUFFER_BYTES },
    });
  }
}

/**
 * A version-3 blob above VERIFY_WHOLE_BLOB_MAX_BYTES, where the backend reads parts of blobs: checked
 * in pieces (checkBlobInPieces), returning the decoded digests (with `decode`). 'whole' for any
 * other blob (versions 1 and 2 have no segments; a header of another layout), read whole.
 */
async function checkLargeBlob(
  backend: VerifyBackend,
  entry: CacheEntry,
  decode: DecodedTensorInfo | undefined,
  block: Uint16Array,
  countRead: (bytes: number) => void,
  wholeBlobMaxBytes: number,
): Promise<DecodedDigests | undefined | 'whole'> {
  if (entry.meta.version !== 3 || entry.compBytes <= wholeBlobMaxBytes || backend.openBlobRanges === undefined) return 'whole';
  const reader = await backend.openBlobRanges(entry.key, entry.blob, entry.compBytes);
  let result: DecodedDigests | undefined | 'whole';
  try {
    result = await checkBlobInPieces(reader, entry, { decode, block });
  } catch (error) {
    // Counted as a whole read counts it: the blob, once it could be read.
    countRead(entry.compBytes);
    throw error;
  } finally {
    await reader.close();
  }
  if (result !== 'whole') countRead(entry.compBytes);
  return result;
}

/** The decode block size given to verifyEntries: an even number of bytes, at least one value. */
function checkDecodeBlockBytes(bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes < 2 || bytes % 2 !== 0) {
    throw new StoreError('INVALID_ARGUMENT', `decodeBlockBytes must be an even number of bytes, at least 2, got ${String(bytes)}`, { details: { decodeBlockBytes: bytes } });
  }
  return bytes;
}

/**
 * Checks every entry: blob present and of the right size, a valid header agreeing with the manifest,
 * an intact checksum, the blob's SHA-256 where recorded, and with `decode` the decoded tensor against its content key
 * (and its recorded SHA-256, if any), decoded and hashed VERIFY_DECODE_BLOCK_BYTES at a time.
 * Problems are collected, not thrown. A version-3 blob above `wholeBlobMaxBytes` is read and checked
 * a segment at a time (checkLargeBlob). `decodeBlockBytes` and `wholeBlobMaxBytes` are for tests
 * (a small even size, so that small tensors span blocks; 0, so that small blobs are read in pieces).
 */
export async function verifyEntries(
  backend: VerifyBackend,
  entries: readonly CacheEntry[],
  generation: number,
  options: VerifyOptions,
  decodeBlockBytes: number = VERIFY_DECODE_BLOCK_BYTES,
  wholeBlobMaxBytes: number = VERIFY_WHOLE_BLOB_MAX_BYTES,
): Promise<VerifyReport> {
  const started = performance.now();
  const problems: VerifyProblem[] = [];
  let buffer = new Uint8Array(0);
  let block = new Uint16Array(0);
  const decodeBlockValues = checkDecodeBlockBytes(decodeBlockBytes) / 2;
  let bytesRead = 0;
  let decoded = 0;
  for (let i = 0; i < entries.length; i++) {
    options.signal?.throwIfAborted();
    const entry = entries[i]!;
    try {
      // The file first: a manifest may claim any valid size (up to MAX_BLOB_BYTES, ~18 GiB) for a
      // blob that is missing or shorter, and nothing is allocated for it then.
      await backend.checkBlob?.(entry.key, entry.blob, entry.compBytes);
      // Above it no reader can take the blob (a read holds a payload whole), in pieces or not.
      requireBuffer(entry, 'blob', entry.compBytes);
      const blockValues = Math.min(entry.meta.elementCount, decodeBlockValues);
      if (options.decode && block.length < blockValues) block = new Uint16Array(blockValues);
      const tensor = {
        keyPrefix: formatContentKeyPrefix(entry.shape, entry.dtype, entry.rawBytes),
        elementCount: entry.meta.elementCount,
        sha256: entry.sha256 !== null,
      };
      // A large version-3 payload is checked a segment at a time: memory stays bounded whatever its size.
      const inPieces = await checkLargeBlob(backend, entry, options.decode ? tensor : undefined, block.subarray(0, blockValues), (bytes) => (bytesRead += bytes), wholeBlobMaxBytes);
      let digests = inPieces === 'whole' ? undefined : inPieces;
      if (inPieces === 'whole') {
        // One buffer for all entries: grow only when a bigger blob comes.
        if (buffer.length < entry.compBytes) buffer = new Uint8Array(entry.compBytes);
        const view = buffer.subarray(0, entry.compBytes);
        await backend.readBlobInto(entry.key, entry.blob, view);
        bytesRead += view.length;
        checkBlobPayload(entry, view);
        // A blob recorded without its SHA-256 (recordBlobSha256: false) rests on its XXH32 above.
        if (entry.blobSha256 !== null && digestHex('sha256', view) !== entry.blobSha256) {
          throw new StoreError('BLOB_CORRUPT', 'blob SHA-256 differs from the manifest blob_sha256', { entry: entry.key });
        }
        if (options.decode) {
          // Block by block: the decoded tensor is never held whole (a 4 GiB one held 4 GiB beside its payload).
          try {
            digests = hashDecodedBlocks(view, tensor, block.subarray(0, blockValues));
          } catch (error) {
            throw new StoreError('BLOB_CORRUPT', `blob does not decode: ${(error as Error).message}`, { entry: entry.key, cause: error });
          }
        }
      }
      if (options.decode && digests !== undefined) {
        // The content key names these very bytes (with shape and dtype): it is always checked; a
        // recorded SHA-256 of the original bytes too, where the writer kept one.
        const decodedKey = digests.key;
        if (decodedKey !== entry.key) {
          throw new StoreError('DIGEST_MISMATCH', 'decoded tensor does not hash to its content key', {
            entry: entry.key,
            details: { decodedKey },
          });
        }
        if (entry.sha256 !== null) {
          const digest = digests.sha256;
          if (digest !== entry.sha256) {
            throw new StoreError('DIGEST_MISMATCH', 'decoded tensor SHA-256 differs from the original sha256', {
              entry: entry.key,
              details: { decodedSha256: digest, sha256: entry.sha256 },
            });
          }
        }
        decoded++;
      }
    } catch (error) {
      problems.push({
        key: entry.key,
        qualname: entry.qualname,
        code: error instanceof StoreError ? error.code : 'IO_ERROR',
        message: (error as Error).message,
      });
    }
    options.onProgress?.({ done: i + 1, total: entries.length, key: entry.key });
  }
  return {
    ok: problems.length === 0,
    checked: entries.length,
    passed: entries.length - problems.length,
    decoded,
    bytesRead,
    problems,
    generation,
    durationMs: performance.now() - started,
  };
}
