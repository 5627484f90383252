import type { BlobsDirectoryKind } from './check-blobs-directory.js';
import type { HeldLock } from './write-lock.js';

/** A blob's descriptor lent for a read (StorageBackend.openBlobSync). */
export interface OpenedBlobFile {
  fd: number;
  path: string;
  /** Done with `fd`: true keeps it open for the blob's next read (its bytes passed the checks), false closes it. Idempotent. */
  release(keep: boolean): void;
}

/**
 * The storage operations the store needs. The filesystem is the only implementation today; an S3
 * backend (a later issue) maps blobs to objects, the manifest to an object replaced by conditional
 * PUT, and journal appends to numbered objects created with If-None-Match (which replaces the lock).
 */
export interface StorageBackend {
  /** Where the cache lives (a directory path, or a URL for object stores). */
  readonly root: string;
  /** A printable location of a file of the cache, for errors. */
  describe(name: string): string;

  /** Creates the root and blobs/ if missing. */
  ensureLayout(): Promise<void>;
  /** manifest.json, or undefined when absent. */
  readManifest(): Promise<Uint8Array | undefined>;
  /**
   * Which manifest file is there now (device, inode, size, modification time), undefined when
   * there is none: a reader compares it with the one it loaded to notice a cache deleted and built
   * again, or a manifest another writer replaced, without reading it. Synchronous: one stat.
   */
  manifestIdentity?(): string | undefined;
  /** Replaces manifest.json atomically and durably. */
  writeManifest(bytes: Uint8Array): Promise<void>;

  /** The journal of a generation, or undefined when absent. */
  openJournal(generation: number): Promise<JournalFile | undefined>;
  /** Creates (or empties) the journal of a generation holding only `header`, durably. */
  createJournal(generation: number, header: Uint8Array): Promise<void>;
  removeJournal(generation: number): Promise<void>;
  /** Gives a journal a second name in the cache directory (kept, never read again; a copy where links fail); resolves its path. */
  keepJournalCopy?(generation: number, name: string): Promise<string>;
  /** The same for manifest.json (recoverDamagedManifest keeps the damaged bytes before replacing them). */
  keepManifestCopy?(name: string): Promise<string>;

  /**
   * Writes a payload durably under a temp name (outside the lock; parallel writers); calls
   * `onWritten` once every byte is written and `payload` is no longer read (before the fsync).
   */
  stageBlob(key: string, payload: Uint8Array, onWritten?: () => void): Promise<StagedBlob>;
  /** Under the writer lock: moves a staged blob to its final name (replacing an uncommitted leftover). */
  publishStagedBlob(staged: StagedBlob): Promise<void>;
  /** Makes published names durable (one directory sync for many blobs). */
  syncBlobNames(): Promise<void>;
  /** Removes a staged temp file if it is still there. */
  discardStagedBlob(staged: StagedBlob): Promise<void>;
  /** Reads exactly target.length bytes of an entry's blob; BLOB_MISSING, BLOB_SIZE_MISMATCH, UNSAFE_BLOB_PATH. */
  readBlobInto(key: string, blob: string, target: Uint8Array): Promise<void>;
  /**
   * Throws what readBlobInto would for a blob that is missing, not a regular file or not of
   * `expectedBytes`, without reading it: verify looks before it allocates a buffer of that size.
   */
  checkBlob?(key: string, blob: string, expectedBytes: number): Promise<void>;
  /** The same with synchronous system calls, where the backend is a local filesystem. */
  readBlobIntoSync?(key: string, blob: string, target: Uint8Array): void;
  /**
   * Opens an entry's blob with readBlobIntoSync's checks (canonical path, no links, a regular file
   * of exactly `expectedBytes`) and returns its descriptor, for a read on another thread; the
   * caller gives it back with `release` once that read is done.
   */
  openBlobSync?(key: string, blob: string, expectedBytes: number): OpenedBlobFile;
  /**
   * Drops what the backend keeps of a blob between reads (an open file, see open-blob-files.ts):
   * its bytes failed a check, or the blob was removed, so the next read opens the path anew.
   */
  forgetBlob?(key: string, blob: string): void;
  /** Drops everything kept between reads (the store is closing). */
  releaseFiles?(): void;

  /** The writer lock (many processes). */
  /** `signal` ends a wait for a live holder (ABORTED); a lock taken is the caller's to release. */
  acquireWriteLock(timeoutMs: number, signal?: AbortSignal): Promise<HeldLock>;

  /**
   * Everything in the cache, for gc; with `only`, the files whose name it accepts (the others are
   * not even stat'ed: a sweep for temp files need not look at every blob); `rootOnly`: not blobs/ at
   * all (journals: a compaction looks for them, and blobs/ may hold a million names).
   */
  listFiles(only?: (name: string) => boolean, options?: { rootOnly?: boolean }): Promise<StoredFile[]>;
  /**
   * Everything in the cache, as listFiles without `only`, by name and type alone (the directory
   * listing's file types: nothing is stat'ed). gc looks up the size and age of the few files it
   * judges by them (statFile): an lstat of every blob was most of its time on a large cache.
   */
  listFileNames(): Promise<ListedFile[]>;
  /** A listed file with its size and modification time, as listFiles gives it; undefined when it is gone. */
  statFile(file: ListedFile): Promise<StoredFile | undefined>;
  /**
   * Removes a listed file. A file in blobs/ is removed only while blobs/ is the cache's own
   * directory (UNSAFE_BLOB_PATH otherwise: check-blobs-directory.ts).
   */
  removeFile(file: ListedFile): Promise<void>;
  /**
   * What the root's blobs/ is, links not followed (`target`: a link's text). Absent where there is
   * no such directory (S3). Writers (stage, publish, commit, gc, drop, recovery) refuse all but
   * 'directory' and 'missing'; reads go through.
   */
  describeBlobsDirectory?(): Promise<{ kind: BlobsDirectoryKind; target?: string }>;
  /** Whether a lock or break-marker file belongs to a dead holder. */
  isLockFileStale(file: ListedFile): Promise<boolean>;
}

export interface StagedBlob {
  readonly key: string;
  /** Backend-specific temp identity. */
  readonly tempName: string;
}

export interface JournalFile {
  readonly generation: number;
  readonly path: string;
  size(): Promise<number>;
  read(offsetBytes: number, lengthBytes: number): Promise<Uint8Array>;
  /** A few bytes read on the calling thread (a record header: checked on every catch-up). */
  peek(offsetBytes: number, lengthBytes: number): Uint8Array;
  /** Writes `bytes` at `offsetBytes` and makes them durable before resolving. */
  append(offsetBytes: number, bytes: Uint8Array): Promise<void>;
  /** Cuts the journal to `lengthBytes`, durably (a torn tail). */
  truncate(lengthBytes: number): Promise<void>;
  /**
   * How many names the file has (a file system's link count; absent: one). More than one: a
   * hard-linked copy of the cache shares it, and a writer must not append to it.
   */
  linkCount?(): number;
  close(): Promise<void>;
}

/** A file of the cache by name and type (listFileNames). */
export interface ListedFile {
  /** '' for the root, 'blobs' for blobs/. */
  dir: '' | 'blobs';
  name: string;
  /** A regular file: not a directory, a link or a FIFO. */
  isFile: boolean;
}

export interface StoredFile extends ListedFile {
  sizeBytes: number;
  mtimeMs: number;
}
