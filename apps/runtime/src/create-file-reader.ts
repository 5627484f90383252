import { open, type FileHandle } from 'node:fs/promises';

/**
 * The runtime's one I/O seam: every byte it reads — shard slices for the raw path, blobs for the
 * cache path — goes through a `ByteReader`, so a wrapper (the pacing reader, a remote-storage
 * adapter) applies identically to both paths.
 */
export interface ByteReader {
  /**
   * Fills all of `target` from `path` starting at `positionBytes`. Rejects with an error whose
   * `code` is `'UNEXPECTED_EOF'` if the file ends first, or with the file system's error.
   */
  readExact(path: string, target: Uint8Array, positionBytes: number): Promise<void>;
  /** Closes cached file handles. In-flight reads finish first. */
  close(): Promise<void>;
}

/** One `read(2)` stays below Node's 2 GiB single-read limit. */
export const MAX_READ_CHUNK_BYTES = 1024 * 1024 * 1024;

/** Idle file handles kept open (shards are few and hot; blobs are many and read once). */
export const DEFAULT_MAX_IDLE_HANDLES = 32;

export class ReadError extends Error {
  readonly code: string;
  readonly path: string;
  constructor(code: string, message: string, path: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadError';
    this.code = code;
    this.path = path;
  }
}

interface HandleEntry {
  handle: Promise<FileHandle>;
  refs: number;
  lastUseMs: number;
}

/**
 * Positioned reads with a small cache of open handles. A handle is closed only when no read uses
 * it, so concurrent reads of one file share it safely; a file replaced by an atomic rename keeps
 * serving the old (complete) inode until its handle is dropped.
 */
export function createFileReader(options: { maxIdleHandles?: number } = {}): ByteReader {
  const maxIdleHandles = options.maxIdleHandles ?? DEFAULT_MAX_IDLE_HANDLES;
  const handles = new Map<string, HandleEntry>();
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
    await Promise.all(evicted.map((entry) => entry.handle.then((handle) => handle.close()).catch(() => undefined)));
  };

  const acquire = (path: string): HandleEntry => {
    let entry = handles.get(path);
    if (entry === undefined) {
      entry = { handle: open(path, 'r'), refs: 0, lastUseMs: 0 };
      // A failed open must not stay cached: the next call retries.
      entry.handle.catch(() => {
        if (handles.get(path) === entry) handles.delete(path);
      });
      handles.set(path, entry);
    }
    entry.refs += 1;
    return entry;
  };

  return {
    async readExact(path, target, positionBytes) {
      if (closed) throw new ReadError('READER_CLOSED', 'reader is closed', path);
      const entry = acquire(path);
      try {
        const handle = await entry.handle;
        let done = 0;
        while (done < target.byteLength) {
          const length = Math.min(target.byteLength - done, MAX_READ_CHUNK_BYTES);
          const { bytesRead } = await handle.read(target, done, length, positionBytes + done);
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
        if (entry.refs === 0) void evictIdle();
      }
    },
    async close() {
      closed = true;
      const all = [...handles.values()];
      handles.clear();
      await Promise.all(all.map((entry) => entry.handle.then((handle) => handle.close()).catch(() => undefined)));
    },
  };
}
