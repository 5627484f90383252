import {
  computePayloadLayout,
  computeSegmentSpans,
  decodeSegments,
  SEGMENT_DIGESTS,
  SEGMENT_VALUES,
  verifySegmentDigests,
  type PayloadLayout,
  type PayloadMeta,
} from '@splitzip/codec';
import type { CacheEntry } from '@splitzip/store';
import { checkPayloadAgainstEntry } from './check-payload-against-entry.js';
import type { DecodeBackend } from './create-cpu-decoder.js';
import type { ByteReader } from './create-file-reader.js';
import { abortedError, describeError, RuntimeError } from './errors.js';
import { readExactAbortable } from './read-exact-abortable.js';
import { takeTurnIfDue } from './take-turn-if-due.js';

/**
 * Payloads of at least this many checksum segments (2^20 values each) are decoded as they arrive.
 * With one segment nothing can start before the last byte: its codes and sm spans are the whole
 * codes and sm sections.
 */
export const STREAM_MIN_SEGMENTS = 2;

/**
 * The layout of `entry`'s payload when the runtime should read it in segment order and decode each
 * segment as soon as its bytes are in (format v3, at least STREAM_MIN_SEGMENTS segments, a backend
 * that would decode it on the calling thread with the codec anyway: `streamMaxValues`), else
 * undefined. Behind a slow link the largest tensor's decode otherwise starts after its last byte
 * (the default model's 2.05M-value embeddings: ~0.4 ms after a paced load's link went quiet).
 * The layout comes from the manifest's meta; the blob's own header is checked against it before
 * any segment is decoded.
 */
export function planStreamedDecode(entry: CacheEntry, backend: DecodeBackend): PayloadLayout | undefined {
  const { version, elementCount, escapeCount, chunkSize } = entry.meta;
  if (version !== 3 || elementCount <= (STREAM_MIN_SEGMENTS - 1) * SEGMENT_VALUES) return undefined;
  if (!(elementCount < (backend.streamMaxValues ?? 0))) return undefined;
  let layout: PayloadLayout;
  try {
    layout = computePayloadLayout(elementCount, escapeCount, chunkSize);
  } catch {
    return undefined; // a meta the codec refuses: the ordinary path reports the blob's own error
  }
  return layout.totalBytes === entry.compBytes ? layout : undefined;
}

export interface StreamedDecodeResult {
  meta: PayloadMeta;
  /** Time in segment decodes and the checksum's combine on this thread (ms). */
  decodeMs: number;
  /** From the first read issued to the last read in (ms): the decodes of earlier segments overlap it. */
  ioMs: number;
}

/**
 * Reads the payload of `entry` from `blobPath` into `payload` (exactly `entry.compBytes` long) as
 * separate reads, issued together in the order the decode needs them — the header, the escape
 * sections, then each segment's codes span and sm span — and decodes each segment into `out`
 * (hashing it in the same pass) as soon as its two spans are in. The checksum, combined from the
 * segment digests and the other sections', is checked before returning: until then `out` holds
 * unverified values, and on any failure the caller must not use them. Every read has settled
 * before this returns or throws, so the staging memory is free to reuse; except on an abort, which
 * ends it at once (a reader may ignore the signal), also while a decode that failed otherwise waits
 * for its reads: then `onAbandoned` gets a promise of the reads left in flight settling, and
 * `payload` must stay out of reuse until it resolves.
 *
 * Throws `CACHE_READ_FAILED` for a read that fails or a payload that fails a check or its
 * checksum, `CACHE_ENTRY_MISMATCH` when the blob's header disagrees with the entry, `ABORTED`.
 */
export async function decodeStreamedPayload(
  reader: ByteReader,
  blobPath: string,
  payload: Uint8Array,
  entry: CacheEntry,
  layout: PayloadLayout,
  out: Uint16Array,
  tensorName: string,
  signal?: AbortSignal,
  onAbandoned?: (settled: Promise<void>) => void,
): Promise<StreamedDecodeResult> {
  const context = { tensor: tensorName, key: entry.key, qualname: entry.qualname, blob: blobPath };
  const startMs = performance.now();
  let readsDoneMs = startMs;
  // Each read ends with the load's abort (ABORTED), whether or not the reader honours the signal.
  const read = (from: number, to: number) => readExactAbortable(reader, blobPath, payload.subarray(from, to), from, signal, tensorName);
  const segmentCount = Math.ceil(entry.meta.elementCount / SEGMENT_VALUES);
  // Every read issued, to be settled on every way out: one still in flight would write into a slot
  // given to another tensor. Once `stopped`, no further read starts.
  const issued: Promise<unknown>[] = [];
  let stopped = false;
  const issue = (from: number, to: number) => {
    if (stopped) throw new RuntimeError('ABORTED', 'streamed read stopped', context);
    const reading = read(from, to);
    issued.push(reading.settled);
    return reading.done;
  };
  const head = issue(0, layout.codes.offsetBytes);
  const escapes = issue(layout.escapeIndex.offsetBytes, layout.totalBytes);
  // Segment k + 1's reads are asked for once segment k's codes span is in (its sm span still on the
  // way), as one read streams its pieces: asked all at once, a large payload's bytes took the paced
  // link ahead of the reads asked before it, and the load's last reads started after it (measured).
  const segmentReads: Promise<unknown>[] = [];
  let previousCodes: Promise<unknown> = Promise.resolve();
  for (let k = 0; k < segmentCount; k++) {
    const span = computeSegmentSpans(layout, k);
    const codes = previousCodes.then(() => issue(span.codes, span.codesEnd));
    const sm = previousCodes.then(() => issue(span.sm, span.smEnd));
    const both = Promise.all([codes, sm]);
    both.catch(() => undefined); // awaited below, unless an earlier failure ended the decode
    segmentReads.push(both);
    previousCodes = codes;
  }
  previousCodes.catch(() => undefined);
  const awaitRead = async (reads: Promise<unknown>) => {
    try {
      await reads;
    } catch (error) {
      // The load's abort, not the reader's own: a reader's ABORTED (its own timeout) fails the read.
      if (signal?.aborted === true) throw error instanceof RuntimeError && error.code === 'ABORTED' ? error : abortedError(`load of ${tensorName} aborted`, signal, context);
      throw new RuntimeError('CACHE_READ_FAILED', `cannot read blob ${blobPath}: ${describeError(error).message}`, context, { cause: error });
    }
  };
  const codecFailure = (error: unknown) =>
    error instanceof RuntimeError
      ? error
      : new RuntimeError('CACHE_READ_FAILED', `blob ${blobPath}: ${describeError(error).message}`, { ...context, codecCode: (error as { code?: unknown } | null)?.code }, {
          cause: error,
        });
  // Every read issued settled (or, on an abort, handed to onAbandoned): on every way out.
  const settleIssued = async () => {
    stopped = true;
    const settleAll = async () => {
      for (let settledUpTo = 0; settledUpTo < issued.length; ) {
        const batch = issued.slice(settledUpTo);
        settledUpTo = issued.length;
        await Promise.all(batch);
      }
    };
    // Aborted: the caller is told at once, and the slot waits for the reads instead.
    if (signal === undefined || onAbandoned === undefined) await settleAll();
    else if (signal.aborted) onAbandoned(settleAll());
    else if (!(await settleUnlessAborted(settleAll(), signal, onAbandoned))) throw abortedError(`load of ${tensorName} aborted`, signal, context);
  };
  const decodeAll = async (): Promise<StreamedDecodeResult> => {
    await awaitRead(Promise.all([head, escapes]));
    let meta: PayloadMeta;
    try {
      meta = checkPayloadAgainstEntry(payload, entry, blobPath, { checksum: false });
    } catch (error) {
      if (!(error instanceof RuntimeError)) throw error;
      throw new RuntimeError(error.code, error.message, { ...error.details, tensor: tensorName }, { cause: error });
    }
    const digests = new Uint32Array(SEGMENT_DIGESTS * segmentCount);
    let decodeMs = 0;
    for (let k = 0; k < segmentCount; k++) {
      await awaitRead(segmentReads[k]!);
      readsDoneMs = performance.now();
      // Segments whose bytes are in already follow each other at once: a turn of the event loop between them when one is due.
      for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
      if (signal?.aborted) throw abortedError(`load of ${tensorName} aborted`, signal, context);
      const segmentStartMs = performance.now();
      try {
        decodeSegments(payload, meta, k, k + 1, out.subarray(k * SEGMENT_VALUES), { digests: digests.subarray(k * SEGMENT_DIGESTS) });
      } catch (error) {
        throw codecFailure(error);
      }
      decodeMs += performance.now() - segmentStartMs;
    }
    const combineStartMs = performance.now();
    try {
      verifySegmentDigests(payload, meta, digests);
    } catch (error) {
      throw codecFailure(error);
    }
    decodeMs += performance.now() - combineStartMs;
    return { meta, decodeMs, ioMs: readsDoneMs - startMs };
  };
  let result: StreamedDecodeResult;
  try {
    result = await decodeAll();
  } catch (error) {
    await settleIssued(); // throws ABORTED instead of `error` when the abort comes first
    throw error;
  }
  await settleIssued();
  return result;
}

/**
 * Waits for `settled` (every read issued) unless `signal` fires first: then `onAbandoned` gets it
 * and this returns false. A decode that failed otherwise (a read error, a header that disagrees)
 * waits for its reads before it throws, and one read ignoring the signal held the load past its
 * abort. Returns true once the reads have settled with no abort: the decode's own outcome stands.
 */
async function settleUnlessAborted(settled: Promise<void>, signal: AbortSignal, onAbandoned: (settled: Promise<void>) => void): Promise<boolean> {
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<false>((resolve) => {
    onAbort = () => resolve(false);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const allSettled = await Promise.race([settled.then(() => true as const), aborted]);
    if (!allSettled) onAbandoned(settled);
    return allSettled;
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}
