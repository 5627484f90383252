import { decodeChunks, getCodecBackend, type CodecArena, type PayloadMeta } from '@splitzip/codec';
import type { CacheEntry } from '@splitzip/store';
import { markSettlingBackend } from './settling-backends.js';

export interface DecodeCallOptions {
  /** Verify the payload's checksum (only asked of backends with `verifiesChecksum`). */
  verifyChecksum?: boolean | undefined;
  /**
   * The codec arena the payload (and maybe `out`) lives in, when it is a staging slot of an arena
   * pool: a backend may decode there in place (thread decoders attach their workers to it).
   */
  arena?: CodecArena | undefined;
  /**
   * The load's abort signal. A backend may stop early when it fires and reject (with anything: the
   * load rejects with the runtime's own `ABORTED`). The runtime's own backends settle either way;
   * `createWorkerPoolDecoder` passes it to its workers (its decode then rejects at once).
   */
  signal?: AbortSignal | undefined;
  /**
   * For a backend that rejects on `signal` while its other threads may still read `payload` or
   * write `out`: call it, before rejecting, with a promise that settles once they are done. The
   * runtime keeps the staging slot holding the payload out of reuse until then (quarantined, as for
   * a read the abort left behind). `out` must not be the caller's buffer while they may write it.
   */
  onAbandoned?: ((settled: Promise<unknown>) => void) | undefined;
}

/**
 * What the runtime needs from a decode backend: turn a validated payload (header read, checksum
 * verified) into exactly `meta.elementCount` BF16 values in `out`. It may be synchronous or
 * asynchronous; it must either fill all of `out` or throw. It may return the CPU milliseconds it
 * spent on this tensor (summed over threads; a sliced or queued decode's wall time includes
 * waiting), which the report then counts as decode time.
 */
export interface DecodeBackend {
  readonly name: string;
  /**
   * When true, the runtime leaves the payload's checksum to the backend (`verifyChecksum: true`),
   * which must then throw a `RuntimeError` with code `CACHE_READ_FAILED` on a mismatch.
   */
  readonly verifiesChecksum?: boolean;
  /** When true, the runtime backs the staging slots it makes for this backend with SharedArrayBuffer. */
  readonly shared?: boolean;
  /**
   * A `shared` backend that decodes tensors of fewer values on the calling thread says how many:
   * their payloads need no shared memory (the runtime may stage a small one outside the pool).
   */
  readonly inlineMaxValues?: number;
  /**
   * Payloads of fewer values that this backend would decode on the calling thread with the codec:
   * the runtime may decode such a payload itself, segment by segment as its bytes arrive through a
   * custom reader (decode-streamed-payload.ts), the same work done earlier. Absent: never.
   */
  readonly streamMaxValues?: number;
  /**
   * True once the backend was closed (or disposed) and decodes nothing more: a load given it
   * refuses it up front (INVALID_ARGUMENT), instead of a quiet `cache-failed` fallback per tensor.
   * Absent: the backend cannot say (a closed one then fails each decode, and its tensors go raw).
   */
  readonly closed?: boolean;
  decode(payload: Uint8Array, meta: PayloadMeta, out: Uint16Array, options?: DecodeCallOptions): void | number | Promise<void | number>;
  /**
   * Reads a payload from a blob file into staging and decodes it with its checksum verified, both
   * on a decode thread (a `shared` backend; absent elsewhere). Decides at once: undefined, having
   * called nothing, when the tensor is not for a thread (small, or no worker ready yet for a
   * tensor this size): the caller reads and decodes it itself. Otherwise each decode thread takes
   * a staging slot from `request.staging` and keeps it for its consecutive reads from that source;
   * `open` is called with that slot when the job is handed to the thread. The header is checked
   * against `check` (when given) on the thread, before anything is decoded.
   */
  readDecode?(request: ReadDecodeRequest): Promise<ReadDecodeResult> | undefined;
  /**
   * `decode` for a caller with no buffer of its own: a backend that decodes on other threads may
   * allocate the values' buffer there (its pages first written there, nothing copied back) and
   * return it. Decides at once: undefined, having done nothing, when it would decode on the
   * calling thread anyway (the caller then allocates and calls `decode`).
   */
  decodeToNew?(payload: Uint8Array, meta: PayloadMeta, options?: DecodeCallOptions): Promise<DecodedBuffer> | undefined;
  /**
   * A tensor's content key computed on another thread: SHA-1 over `prefix` (the store's
   * formatContentKeyPrefix, which checked the tensor) then `bytes`, which must not change until
   * it settles. Decides at once: undefined, having done nothing, when the caller should hash
   * itself (a small tensor; no thread ready yet). A rejection leaves the hash to the caller too.
   */
  hashContentKey?(bytes: Uint8Array, prefix: string): Promise<HashedContentKey> | undefined;
  close?(): Promise<void>;
}

/** What hashContentKey resolves to: the key, and the CPU ms its thread spent hashing. */
export interface HashedContentKey {
  key: string;
  busyMs: number;
}

/** What decodeToNew returns: the values in an ArrayBuffer of their own, and the CPU ms spent. */
export interface DecodedBuffer {
  values: Uint16Array;
  busyMs: number;
}

export interface ReadDecodeRequest {
  /** The tensor's value count. */
  values: number;
  /** Where the payload may be staged: a decode thread takes one slot and reuses it for its jobs. */
  staging: ReadDecodeStaging;
  /**
   * Opens the blob for a read into `slot` (a slot taken from `staging`), synchronously, once a
   * decode thread has taken the job; a throw fails this request only.
   */
  open(slot: StagingLease): OpenedPayloadFile;
  /** Aborting it rejects the request with `ABORTED` while it still waits for a thread (its load was aborted). */
  signal?: AbortSignal | undefined;
}

/**
 * A source of staging slots for readDecode: requests with the same `source` (one staging pool)
 * can share a decode thread's slot. Every slot taken is at least as large as any payload of the
 * source.
 */
export interface ReadDecodeStaging {
  readonly source: object;
  /**
   * `signal`: the taker no longer needs the slot (its reads went away): a wait for one ends.
   * `slotWaitMs`: what the read it is for has left of its pool's slotWaitMs (a thread decoder
   * passes it once a take of this source timed out, so each read's deadline counts its own wait
   * for a slot); undefined: the pool's own.
   */
  take(signal?: AbortSignal, slotWaitMs?: number): StagingLease | Promise<StagingLease>;
}

/** A staging slot held by a decode thread between jobs; `release` gives it back (once). */
export interface StagingLease {
  readonly bytes: Uint8Array;
  /** The codec arena holding `bytes`, if any. */
  readonly arena: CodecArena | undefined;
  release(): void;
}

/** A blob file opened for a decode thread, and where its bytes and values go. */
export interface OpenedPayloadFile {
  /** An open blob file (the opener checked it, and closes it after the job settles). */
  fd: number;
  /** Where the payload goes: exactly its bytes (a view of the staging slot). */
  payload: Uint8Array;
  /**
   * Where the decoded values go, exactly the tensor's; absent: the backend allocates them (an
   * ordinary ArrayBuffer of their own, on the decode thread, so that its pages are first written
   * there) and returns them as ReadDecodeResult.values.
   */
  out?: Uint16Array | undefined;
  /** The codec arena holding `payload` (and maybe `out`), if any. */
  arena?: CodecArena | undefined;
  /**
   * The manifest entry the payload must agree with: the thread checks the header read against it
   * (checkPayloadAgainstEntry) before decoding. Absent: only the decode's own checks.
   */
  check?: { entry: PayloadEntryFields; blobPath: string } | undefined;
}

/** The fields of a manifest entry that its blob's header must repeat (a plain object: it is posted to a thread). */
export type PayloadEntryFields = Pick<CacheEntry, 'key' | 'qualname' | 'compBytes' | 'rawBytes' | 'meta' | 'codebook'>;

export interface ReadDecodeResult {
  /** The decode thread's time reading the blob, and decoding (CPU, ms). */
  readMs: number;
  decodeMs: number;
  /** The values, when the request's `out` was absent: a view of a buffer of their own. */
  values?: Uint16Array | undefined;
}

/**
 * Values decoded between two returns to the event loop (2^21 values = 4 MiB of BF16, about 1 ms
 * with WebAssembly SIMD). Decoding a large tensor in one go would hold the event loop for tens of
 * milliseconds, during which no read completion is seen and no next read is issued: slicing keeps
 * the reads of the next payloads flowing while this one decodes.
 */
export const DEFAULT_DECODE_SLICE_VALUES = 1 << 21;

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The CPU backend: the codec's fast path (WebAssembly SIMD where available, tuned JS otherwise) on
 * the calling thread, in slices of whole chunks with a return to the event loop between slices.
 */
export function createCpuDecoder(options: { sliceValues?: number } = {}): DecodeBackend {
  const sliceValues = options.sliceValues ?? DEFAULT_DECODE_SLICE_VALUES;
  return markSettlingBackend({
    get name() {
      return `cpu:${getCodecBackend()}`;
    },
    streamMaxValues: Infinity,
    async decode(payload, meta, out) {
      const chunksPerSlice = Math.max(1, Math.floor(sliceValues / meta.chunkSize));
      let busyMs = 0;
      for (let firstChunk = 0; firstChunk < meta.chunkCount; firstChunk += chunksPerSlice) {
        if (firstChunk > 0) await yieldToEventLoop();
        const startMs = performance.now();
        const chunkCount = Math.min(chunksPerSlice, meta.chunkCount - firstChunk);
        decodeChunks(payload, meta, firstChunk, chunkCount, out.subarray(firstChunk * meta.chunkSize));
        busyMs += performance.now() - startMs;
      }
      return busyMs;
    },
  });
}
