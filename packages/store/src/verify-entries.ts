import { decode } from '@splitzip/codec';
import type { StorageBackend } from './backend.js';
import { digestHex } from './hash-bytes.js';
import { checkBlobPayload } from './check-blob-payload.js';
import { computeContentKey } from './compute-content-key.js';
import { StoreError } from './errors.js';
import { MAX_BUFFER_BYTES } from './limits.js';
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
 * Checks every entry: blob present and of the right size, a valid header agreeing with the manifest,
 * an intact checksum, the blob's SHA-256 where recorded, and with `decode` the decoded tensor against its content key
 * (and its recorded SHA-256, if any).
 * Problems are collected, not thrown.
 */
export async function verifyEntries(
  backend: Pick<StorageBackend, 'readBlobInto' | 'checkBlob'>,
  entries: readonly CacheEntry[],
  generation: number,
  options: VerifyOptions,
): Promise<VerifyReport> {
  const started = performance.now();
  const problems: VerifyProblem[] = [];
  let buffer = new Uint8Array(0);
  let values = new Uint16Array(0);
  let bytesRead = 0;
  let decoded = 0;
  for (let i = 0; i < entries.length; i++) {
    options.signal?.throwIfAborted();
    const entry = entries[i]!;
    try {
      // The file first: a manifest may claim any valid size (up to MAX_BLOB_BYTES, ~18 GiB) for a
      // blob that is missing or shorter, and nothing is allocated for it then.
      await backend.checkBlob?.(entry.key, entry.blob, entry.compBytes);
      requireBuffer(entry, 'blob', entry.compBytes);
      if (options.decode) requireBuffer(entry, 'decoded tensor', entry.rawBytes);
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
        const count = entry.meta.elementCount;
        if (values.length < count) values = new Uint16Array(count);
        const out = values.subarray(0, count);
        try {
          decode(view, out, { verify: false });
        } catch (error) {
          throw new StoreError('BLOB_CORRUPT', `blob does not decode: ${(error as Error).message}`, { entry: entry.key, cause: error });
        }
        const bytes = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
        // The content key names these very bytes (with shape and dtype): it is always checked; a
        // recorded SHA-256 of the original bytes too, where the writer kept one.
        const decodedKey = computeContentKey(bytes, entry.shape, entry.dtype);
        if (decodedKey !== entry.key) {
          throw new StoreError('DIGEST_MISMATCH', 'decoded tensor does not hash to its content key', {
            entry: entry.key,
            details: { decodedKey },
          });
        }
        if (entry.sha256 !== null) {
          const digest = digestHex('sha256', bytes);
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
