import type { ByteReader } from './create-file-reader.js';
import { ReadError } from './read-error.js';
import { takeTurnIfDue } from './take-turn-if-due.js';
import { waitUntil } from './wait-until.js';
import { argumentError, checkOptionsArgument, checkReaderArgument, optionNames } from './check-load-arguments.js';

/** Default pacing granularity: each read is split into pieces of at most this many bytes. */
export const DEFAULT_PACING_CHUNK_BYTES = 1024 * 1024;

/** Default bucket size: four pieces (4 MiB: a link that was idle delivers that much at once, then paces). */
export const DEFAULT_PACING_BURST_BYTES = 4 * 1024 * 1024;

/** A read asks for its next piece this long before the link has delivered the current one. */
export const PIECE_LEAD_MS = 1;

export interface PacedReaderOptions {
  /** Sustained rate: bytes per second over any window longer than burst / rate. */
  bytesPerSecond: number;
  /**
   * Token bucket capacity in bytes: what a link that sat idle delivers at once (default 4 MiB).
   * 0: none — every read settles no earlier than the instant the link finishes delivering it
   * (a benchmark of small loads wants this: a burst lets its first bytes through free).
   */
  burstBytes?: number | undefined;
  /** Reads are split into pieces of at most this size, each paced before it is read. */
  chunkBytes?: number | undefined;
}

export interface PacedReader extends ByteReader {
  /** Bytes the bucket has granted so far (equals the bytes actually read, once reads settle). */
  readonly grantedBytes: number;
  /** Total time reads spent waiting for tokens, in milliseconds (summed over concurrent reads). */
  readonly waitedMs: number;
  /**
   * Link time lost since the first read, in milliseconds: the spans in which the link had delivered
   * every byte of every read asked and no new read came (the reader's caller kept it idle).
   */
  readonly idleMs: number;
  /**
   * The `performance.now()` instant at which the link finishes delivering every byte granted so
   * far (0 before the first read). No read settles before the link has delivered its last byte
   * (less the burst), so once every read has settled `performance.now() >= linkFreeAtMs - burst`.
   */
  readonly linkFreeAtMs: number;
}

/**
 * A token-bucket pacing wrapper over a {@link ByteReader}: it models a link of `bytesPerSecond`
 * (network storage, an object store, a cold disk) in front of a fast local file.
 *
 * Every read is split into pieces of at most `chunkBytes`; before a piece is read it takes that
 * many tokens from one bucket shared by all reads through this wrapper. The bucket refills at
 * `bytesPerSecond` and holds at most `burstBytes`. It is implemented in its virtual-clock form
 * (GCRA): `tat` is the instant the link finishes delivering every byte granted so far; a read's
 * first piece of n bytes moves `tat` to `max(tat, now) + n / rate`, its later pieces to
 * `tat + n / rate` (the read streams on while its caller is busy), and a piece is delivered at
 * `tat - burst / rate`. So the link's schedule never carries more than `rate·T + burst` bytes in
 * any interval T, whatever the concurrency (a caller that comes back late for a piece finds it
 * delivered already). A read settles no earlier than the instant its last piece is delivered
 * ({@link waitUntil}: never before, a fraction of a millisecond after; the old timers let a read
 * settle up to a millisecond early, a millisecond of link free), so its caller never holds a byte
 * the link has not delivered, and with `burstBytes: 0` n bytes take n / rate however they are
 * split. Its earlier pieces end {@link PIECE_LEAD_MS} before their delivery (the caller sees none
 * of them: the read asks for its next piece while the link is still busy with this one).
 * Each piece is copied from the inner reader while the link delivers it, not after: bytes that
 * stream in land in the caller's buffer as they arrive, so the copy adds nothing past the link's
 * last byte (on the loading thread, a synchronous 1 MiB copy after it cost 0.1-0.3 ms).
 *
 * Pieces are paced on the bytes actually requested from the inner reader — blob bytes on the
 * cache path, tensor bytes on the raw path — so both paths see the same link.
 */
export function createPacedReader(inner: ByteReader, options: PacedReaderOptions): PacedReader {
  checkReaderArgument(inner, 'inner', true);
  checkOptionsArgument(options, optionNames<PacedReaderOptions>({ bytesPerSecond: true, burstBytes: true, chunkBytes: true }));
  const { bytesPerSecond } = options;
  const chunkBytes = options.chunkBytes ?? DEFAULT_PACING_CHUNK_BYTES;
  const burstBytes = options.burstBytes ?? Math.max(DEFAULT_PACING_BURST_BYTES, chunkBytes);
  if (!(bytesPerSecond > 0) || !Number.isFinite(bytesPerSecond)) {
    throw argumentError('bytesPerSecond', 'a finite number > 0', bytesPerSecond);
  }
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1) throw argumentError('chunkBytes', 'a whole number of bytes >= 1', chunkBytes);
  if (typeof burstBytes !== 'number' || !(burstBytes >= 0) || !Number.isFinite(burstBytes)) throw argumentError('burstBytes', 'a finite number of bytes >= 0', burstBytes);
  const bytesPerMs = bytesPerSecond / 1000;
  const burstMs = burstBytes / bytesPerMs;
  let tatMs = 0;
  let grantedBytes = 0;
  let waitedMs = 0;
  let idleMs = 0;

  /**
   * Takes `bytes` tokens and waits until they may be read. A read's first piece starts on the link
   * no earlier than now (a link with nothing asked of it idles). Its later pieces continue its
   * stream right after the bytes granted so far, however late the caller comes back for them: the
   * whole range was requested, and a link streams a request in flight into its buffer while the
   * client is busy. Pacing them from `now` instead made a lone large read crawl at the pace of the
   * timers (a 1 MiB piece every 1.5-2.3 ms with millisecond timers and the copy: 57 ms for the 24
   * MiB read that ends the 1.07 GB model's cache load, against 25 ms of link time).
   */
  const takeTokens = (bytes: number, continuesRead: boolean): number => {
    const nowMs = performance.now();
    let startMs = tatMs;
    if (!continuesRead && nowMs > tatMs) {
      if (tatMs > 0) idleMs += nowMs - tatMs;
      startMs = nowMs;
    }
    tatMs = startMs + bytes / bytesPerMs;
    grantedBytes += bytes;
    const deliveredAtMs = tatMs - burstMs;
    if (deliveredAtMs > nowMs) waitedMs += deliveredAtMs - nowMs;
    return deliveredAtMs;
  };

  return {
    get grantedBytes() {
      return grantedBytes;
    },
    get waitedMs() {
      return waitedMs;
    },
    get idleMs() {
      return idleMs;
    },
    get linkFreeAtMs() {
      return tatMs;
    },
    async readExact(path, target, positionBytes, readOptions) {
      const signal = readOptions?.signal;
      for (let done = 0; done < target.byteLength; done += chunkBytes) {
        // Behind a busy loading thread every deadline has passed and the inner reads are
        // synchronous: the pieces of every read in flight would follow each other as microtasks.
        for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
        // The signal goes to the inner reader, and stops this one between its pieces: before the
        // piece takes its tokens, so a piece never read charges no link time to the other reads.
        if (signal?.aborted === true) throw new ReadError('ABORTED', `${path}: read aborted`, path, signal.reason === undefined ? undefined : { cause: signal.reason });
        const length = Math.min(chunkBytes, target.byteLength - done);
        const deliveredAtMs = takeTokens(length, done > 0);
        const piece = target.subarray(done, done + length);
        const copied = readOptions === undefined ? inner.readExact(path, piece, positionBytes + done) : inner.readExact(path, piece, positionBytes + done, readOptions);
        if (done + length >= target.byteLength) {
          // The last piece: the read settles once the link has delivered it (and it is copied).
          await Promise.all([copied, waitUntil(deliveredAtMs)]);
        } else {
          // An earlier piece: the read asks for its next one PIECE_LEAD_MS before the link has
          // delivered this one (a stream goes on while its client copies), on time: a timer that
          // fired late behind a busy loading thread let other reads take the link first, and the
          // rest of this read waited behind them.
          await Promise.all([copied, waitUntil(deliveredAtMs - PIECE_LEAD_MS)]);
        }
      }
    },
    close: async () => {
      if (typeof inner.close === 'function') await inner.close();
    },
  };
}
