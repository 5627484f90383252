import { close, closeSync, open, openSync, read, readSync } from 'node:fs';
import { ReadError } from './read-error.js';
import { takeTurnIfDue } from './take-turn-if-due.js';
import { argumentError, checkByteCountArgument, checkOptionsArgument, optionNames } from './check-load-arguments.js';

/**
 * The runtime's one I/O seam: every byte it reads — shard slices for the raw path, blobs for the
 * cache path — goes through a `ByteReader`, so a wrapper (the pacing reader, a remote-storage
 * adapter) applies identically to both paths.
 */
export interface ByteReader {
  /**
   * Fills all of `target` from `path` starting at `positionBytes`. Rejects with an error whose
   * `code` is `'UNEXPECTED_EOF'` if the file ends first, or with the file system's error.
   * `options.signal` (passed when the load has a signal) asks the read to stop: a reader should
   * reject soon after it fires and write no more into `target`. The load does not wait for it: it
   * rejects ABORTED at once and keeps the memory the read was given out of reuse until the read
   * settles (a staging slot), but a caller's own output buffer may still be written into by a
   * reader that ignores the signal.
   */
  readExact(path: string, target: Uint8Array, positionBytes: number, options?: ByteReadOptions): Promise<void>;
  /** Closes cached file handles. In-flight reads finish first. */
  close(): Promise<void>;
}

/** What a load passes to one `readExact`. */
export interface ByteReadOptions {
  /** The load's abort signal: stop reading when it fires. */
  signal?: AbortSignal | undefined;
}

/** ReadError ABORTED for a read whose signal fired (its reason as the cause). */
function readAbortedError(path: string, signal: AbortSignal): ReadError {
  return new ReadError('ABORTED', `${path}: read aborted`, path, signal.reason === undefined ? undefined : { cause: signal.reason });
}

/** One `read(2)` stays below Node's 2 GiB single-read limit. */
export const MAX_READ_CHUNK_BYTES = 1024 * 1024 * 1024;

/** Idle file handles kept open (shards are few and hot; blobs are many and read once). */
export const DEFAULT_MAX_IDLE_HANDLES = 32;

/**
 * Default size up to which a read (and the open of its file, when it is the first) is made with
 * synchronous calls. An asynchronous open or read is a thread-pool round trip that costs the
 * calling thread ~40-65 µs on a busy 2-core machine (a profile of the default model's paced cache
 * load: 33 blob opens and 61 reads took 4.8 ms of its 13 ms), more than a 1 MiB copy from the
 * page cache (~0.1 ms); on a cold local disk such a read blocks the calling thread for a
 * millisecond or two. The store's readBlobSync path uses the same bound.
 */
export const DEFAULT_SYNC_READ_MAX_BYTES = 1024 * 1024;



interface HandleEntry {
  /** The open descriptor; undefined while an asynchronous open is in flight. */
  fd: number | undefined;
  /** The asynchronous open, when the file was opened that way. */
  opening: Promise<number> | undefined;
  refs: number;
  lastUseMs: number;
  /** Set by close() while reads use the file: called by the last of them (a descriptor is never closed under a read). */
  onIdle?: (() => void) | undefined;
}

export interface FileReaderOptions {
  /** Idle files kept open (default DEFAULT_MAX_IDLE_HANDLES). */
  maxIdleHandles?: number | undefined;
  /**
   * Reads up to this many bytes — and the open of their file, when they are its first — are made
   * with synchronous calls (default DEFAULT_SYNC_READ_MAX_BYTES; 0: never, e.g. on a network file
   * system, where an open or read can block for a long time).
   */
  syncReadMaxBytes?: number | undefined;
}

const openAsync = (path: string) =>
  new Promise<number>((resolve, reject) => open(path, 'r', (error, fd) => (error ? reject(error) : resolve(fd))));

const readAsync = (fd: number, target: Uint8Array, offset: number, length: number, position: number) =>
  new Promise<number>((resolve, reject) =>
    read(fd, target, offset, length, position, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead))),
  );

/** Closes an entry's descriptor (once its open settles), ignoring errors: nothing is left to read. */
const closeQuietly = (entry: HandleEntry, sync: boolean): Promise<void> | undefined => {
  const closeFd = (fd: number) => {
    if (!sync) return new Promise<void>((resolve) => close(fd, () => resolve()));
    try {
      closeSync(fd);
    } catch {
      // already closed or never valid: nothing to release
    }
    return undefined;
  };
  if (entry.fd !== undefined) return closeFd(entry.fd);
  return entry.opening?.then(closeFd, () => undefined);
};

/**
 * Positioned reads with a small cache of open files. A file is closed only when no read uses it,
 * so concurrent reads of one file share it safely; a file replaced by an atomic rename keeps
 * serving the old (complete) inode until it is dropped. Small reads run synchronously (see
 * {@link DEFAULT_SYNC_READ_MAX_BYTES}), larger ones on the thread pool.
 */
export function createFileReader(options: FileReaderOptions = {}): ByteReader {
  checkOptionsArgument(options, optionNames<FileReaderOptions>({ maxIdleHandles: true, syncReadMaxBytes: true }));
  const maxIdleHandles = options.maxIdleHandles ?? DEFAULT_MAX_IDLE_HANDLES;
  const syncReadMaxBytes = options.syncReadMaxBytes ?? DEFAULT_SYNC_READ_MAX_BYTES;
  if (!Number.isSafeInteger(maxIdleHandles) || maxIdleHandles < 0) throw argumentError('maxIdleHandles', 'a whole number >= 0', maxIdleHandles);
  checkByteCountArgument(syncReadMaxBytes, 'syncReadMaxBytes');
  const handles = new Map<string, HandleEntry>();
  // A reader that opens and reads small files synchronously closes them the same way (a close is
  // a thread-pool round trip too: 1.8 ms of the calling thread for the default model's 36 files).
  const syncClose = syncReadMaxBytes > 0;
  let closed = false;

  const evictIdle = async () => {
    if (handles.size <= maxIdleHandles) return;
    const idle = [...handles.entries()].filter(([, entry]) => entry.refs === 0).sort((a, b) => a[1].lastUseMs - b[1].lastUseMs);
    const excess = handles.size - maxIdleHandles;
    // Remove synchronously (no read can pick them up again), then close.
    const evicted = idle.slice(0, excess).map(([path, entry]) => {
      handles.delete(path);
      return entry;
    });
    await Promise.all(evicted.map((entry) => closeQuietly(entry, syncClose)));
  };

  /** The file's entry, opened now when `sync` (a failed synchronous open throws and caches nothing). */
  const acquire = (path: string, sync: boolean): HandleEntry => {
    let entry = handles.get(path);
    if (entry === undefined) {
      if (sync) {
        entry = { fd: openSync(path, 'r'), opening: undefined, refs: 0, lastUseMs: 0 };
      } else {
        const opening = openAsync(path);
        const created: HandleEntry = { fd: undefined, opening, refs: 0, lastUseMs: 0 };
        // A failed open must not stay cached: the next call retries.
        opening.then(
          (fd) => {
            created.fd = fd;
          },
          () => {
            if (handles.get(path) === created) handles.delete(path);
          },
        );
        entry = created;
      }
      handles.set(path, entry);
    }
    entry.refs += 1;
    return entry;
  };

  return {
    async readExact(path, target, positionBytes, readOptions) {
      if (closed) throw new ReadError('READER_CLOSED', 'reader is closed', path);
      const signal = readOptions?.signal;
      const stopIfAborted = () => {
        if (signal?.aborted === true) throw readAbortedError(path, signal);
      };
      stopIfAborted();
      const sync = target.byteLength <= syncReadMaxBytes;
      if (sync) {
        // A synchronous read settles at once: reads that follow each other this way never let the
        // event loop turn (takeTurnIfDue).
        for (let turn = takeTurnIfDue(); turn !== undefined; turn = takeTurnIfDue()) await turn;
        if (closed) throw new ReadError('READER_CLOSED', 'reader is closed', path);
        stopIfAborted();
      }
      const entry = acquire(path, sync);
      try {
        const fd = entry.fd ?? (await (entry.opening as Promise<number>));
        let done = 0;
        while (done < target.byteLength) {
          // Between pieces (after the open, before each read(2)): one already asked of the thread pool cannot be called back.
          stopIfAborted();
          const length = Math.min(target.byteLength - done, MAX_READ_CHUNK_BYTES);
          const bytesRead = sync
            ? readSync(fd, target, done, length, positionBytes + done)
            : await readAsync(fd, target, done, length, positionBytes + done);
          if (bytesRead === 0) {
            throw new ReadError(
              'UNEXPECTED_EOF',
              `${path}: file ended at ${positionBytes + done}, wanted ${target.byteLength} bytes from ${positionBytes}`,
              path,
            );
          }
          done += bytesRead;
        }
      } finally {
        entry.refs -= 1;
        entry.lastUseMs = performance.now();
        if (entry.refs === 0) {
          if (entry.onIdle !== undefined) entry.onIdle();
          else void evictIdle();
        }
      }
    },
    async close() {
      closed = true;
      const all = [...handles.values()];
      handles.clear();
      // A descriptor closed under a read in flight could be reused by the next open: wait for them.
      await Promise.all(
        all.map((entry) =>
          entry.refs === 0
            ? closeQuietly(entry, syncClose)
            : new Promise<void>((resolve) => {
                entry.onIdle = () => resolve(closeQuietly(entry, syncClose));
              }),
        ),
      );
    },
  };
}
