import { digestHex } from './hash-bytes.js';
import { checkBlobPayload } from './check-blob-payload.js';
import { formatContentKeyPrefix } from './compute-content-key.js';
import { hashDecodedBlocks, VERIFY_DECODE_BLOCK_BYTES, type DecodedDigests, type DecodedTensorInfo } from './hash-decoded-blocks.js';
import type { VerifyBackend } from './blob-range-reader.js';
import { checkBlobInPieces } from './verify-blob-in-pieces.js';
import { StoreError } from './errors.js';
import { forEachLimited } from './for-each-limited.js';
import { MAX_BUFFER_BYTES, VERIFY_CONCURRENCY, VERIFY_IN_FLIGHT_BYTES, VERIFY_WHOLE_BLOB_MAX_BYTES } from './limits.js';
import { VerifyMemory } from './verify-memory.js';
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
 * Whether a blob is checked in pieces (checkLargeBlob): a version-3 one above `wholeBlobMaxBytes`,
 * where the backend reads parts of blobs. Versions 1 and 2 have no segments.
 */
function readsInPieces(backend: VerifyBackend, entry: CacheEntry, wholeBlobMaxBytes: number): boolean {
  return entry.meta.version === 3 && entry.compBytes > wholeBlobMaxBytes && backend.openBlobRanges !== undefined;
}

/**
 * A blob that readsInPieces, checked in pieces (checkBlobInPieces), returning the decoded digests
 * (with `decode`); 'whole' for a header of another layout, to be read whole.
 */
async function checkLargeBlob(
  backend: VerifyBackend,
  entry: CacheEntry,
  decode: DecodedTensorInfo | undefined,
  block: Uint16Array,
  countRead: (bytes: number) => void,
): Promise<DecodedDigests | undefined | 'whole'> {
  const reader = await backend.openBlobRanges!(entry.key, entry.blob, entry.compBytes);
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

/** What checkEntry needs besides the entry: the same for every entry of one verifyEntries call. */
interface EntryCheck {
  backend: VerifyBackend;
  memory: VerifyMemory;
  decode: boolean;
  decodeBlockValues: number;
  wholeBlobMaxBytes: number;
  countRead: (bytes: number) => void;
  /**
   * VerifyOptions.signal, checked once a check has its memory, before it reads: a check started
   * beside others may wait there long (behind a large blob), and once aborted it reads nothing.
   */
  signal: AbortSignal | undefined;
}

/** `values` decode values at the start of `buffer` (which starts at an even offset of its memory). */
function blockOf(buffer: Uint8Array, values: number): Uint16Array {
  return new Uint16Array(buffer.buffer, buffer.byteOffset, values);
}

/** Checks one entry (see verifyEntries), throwing its problem; true when its tensor was decoded and matched. */
async function checkEntry(check: EntryCheck, entry: CacheEntry): Promise<boolean> {
  const { backend, memory } = check;
  // The file first: a manifest may claim any valid size (up to MAX_BLOB_BYTES, ~18 GiB) for a
  // blob that is missing or shorter, and nothing is allocated for it then.
  await backend.checkBlob?.(entry.key, entry.blob, entry.compBytes);
  // Above it no reader can take the blob (a read holds a payload whole), in pieces or not.
  requireBuffer(entry, 'blob', entry.compBytes);
  const blockValues = check.decode ? Math.min(entry.meta.elementCount, check.decodeBlockValues) : 0;
  const blockBytes = 2 * blockValues;
  const tensor = {
    keyPrefix: formatContentKeyPrefix(entry.shape, entry.dtype, entry.rawBytes),
    elementCount: entry.meta.elementCount,
    sha256: entry.sha256 !== null,
  };
  let digests: DecodedDigests | undefined;
  let whole = true;
  if (readsInPieces(backend, entry, check.wholeBlobMaxBytes)) {
    // A large version-3 payload is checked a segment at a time: memory stays bounded whatever its
    // size. The check makes its own buffers: reserved as much as a whole read at the threshold (more than they take).
    const lease = await memory.take(blockBytes, VERIFY_WHOLE_BLOB_MAX_BYTES);
    try {
      check.signal?.throwIfAborted();
      const result = await checkLargeBlob(backend, entry, check.decode ? tensor : undefined, blockOf(lease.buffer, blockValues), check.countRead);
      if (result !== 'whole') {
        digests = result;
        whole = false;
      }
    } finally {
      memory.give(lease);
    }
  }
  if (whole) {
    // The decode block and the blob in one buffer, the block first (at an even offset); a blob
    // above the memory's capacity (read whole only where the backend reads no parts, or in
    // versions 1 and 2) gets its block apart, so that its buffer is the blob's size.
    const apart = blockBytes + entry.compBytes > VERIFY_IN_FLIGHT_BYTES;
    const lease = await memory.take(apart ? entry.compBytes : blockBytes + entry.compBytes);
    try {
      check.signal?.throwIfAborted();
      const block = apart ? new Uint16Array(blockValues) : blockOf(lease.buffer, blockValues);
      const at = apart ? 0 : blockBytes;
      const view = lease.buffer.subarray(at, at + entry.compBytes);
      await backend.readBlobInto(entry.key, entry.blob, view);
      check.countRead(view.length);
      checkBlobPayload(entry, view);
      // A blob recorded without its SHA-256 (recordBlobSha256: false) rests on its XXH32 above.
      if (entry.blobSha256 !== null && digestHex('sha256', view) !== entry.blobSha256) {
        throw new StoreError('BLOB_CORRUPT', 'blob SHA-256 differs from the manifest blob_sha256', { entry: entry.key });
      }
      if (check.decode) {
        // Block by block: the decoded tensor is never held whole (a 4 GiB one held 4 GiB beside its payload).
        try {
          digests = hashDecodedBlocks(view, tensor, block);
        } catch (error) {
          throw new StoreError('BLOB_CORRUPT', `blob does not decode: ${(error as Error).message}`, { entry: entry.key, cause: error });
        }
      }
    } finally {
      memory.give(lease);
    }
  }
  if (!check.decode || digests === undefined) return false;
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
  return true;
}

/**
 * Checks every entry: blob present and of the right size, a valid header agreeing with the manifest,
 * an intact checksum, the blob's SHA-256 where recorded, and with `decode` the decoded tensor against its content key
 * (and its recorded SHA-256, if any), decoded and hashed VERIFY_DECODE_BLOCK_BYTES at a time.
 * Problems are collected, not thrown. A version-3 blob above `wholeBlobMaxBytes` is read and checked
 * a segment at a time (checkLargeBlob). `decodeBlockBytes` and `wholeBlobMaxBytes` are for tests
 * (a small even size, so that small tensors span blocks; 0, so that small blobs are read in pieces).
 *
 * Entries are checked a few at once (the backend's `verifyConcurrency`, else VERIFY_CONCURRENCY),
 * their buffers at most VERIFY_IN_FLIGHT_BYTES together beside one larger blob (VerifyMemory);
 * the report, the progress events and the signal's checks are those of checking them one after
 * another, in order (forEachLimited): one at a time, a check's file-system round trips left the
 * CPU idle (half of a 23 s verify of 64k small entries).
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
  const decodeBlockValues = checkDecodeBlockBytes(decodeBlockBytes) / 2;
  const concurrency = backend.verifyConcurrency ?? VERIFY_CONCURRENCY;
  let bytesRead = 0;
  let decoded = 0;
  const check: EntryCheck = {
    backend,
    memory: new VerifyMemory(VERIFY_IN_FLIGHT_BYTES, concurrency),
    decode: Boolean(options.decode),
    decodeBlockValues,
    wholeBlobMaxBytes,
    countRead: (bytes) => (bytesRead += bytes),
    signal: options.signal,
  };
  const found: (VerifyProblem | undefined)[] = new Array<VerifyProblem | undefined>(entries.length).fill(undefined);
  await forEachLimited(
    entries.length,
    concurrency,
    async (i) => {
      const entry = entries[i]!;
      try {
        if (await checkEntry(check, entry)) decoded++;
      } catch (error) {
        // Aborted before its read: verify rejects with the reason (never a problem of this entry).
        if (options.signal?.aborted === true && error === options.signal.reason) throw error;
        found[i] = {
          key: entry.key,
          qualname: entry.qualname,
          code: error instanceof StoreError ? error.code : 'IO_ERROR',
          message: (error as Error).message,
        };
      }
    },
    (i) => options.onProgress?.({ done: i + 1, total: entries.length, key: entries[i]!.key }),
    options.signal,
  );
  const problems = found.filter((problem) => problem !== undefined);
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
