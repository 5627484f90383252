import { close as closeFd, constants, fstat as fstatFd, fstatSync, statSync, open as openFd, openSync, read as readFd, readSync, realpathSync } from 'node:fs';
import { promisify } from 'node:util';
import { copyFile, link, lstat, mkdir, open, readdir, readlink, realpath, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { BlobRangeReader } from './blob-range-reader.js';
import type { JournalFile, ListedFile, OpenedBlobFile, StagedBlob, StorageBackend, StoredFile } from './backend.js';
import { callHook } from './call-hook.js';
import { StoreError, errnoCode, toIoError, toWriteError } from './errors.js';
import { readFully, readFullySync, writeFully, type ReadAt } from './io-pieces.js';
import { MAX_MANIFEST_BYTES } from './limits.js';
import { closeQuietly, forgetOpenBlobFile, forgetOpenBlobFiles, keepOpenBlobFile, openSheddingKept, openSheddingKeptAsync, takeOpenBlobFile } from './open-blob-files.js';
import { removeAbandonedLockTemps } from './remove-abandoned-lock-temps.js';
import { acquireLock, createToken, isLockFileStale, pidSpaceTag, type HeldLock } from './write-lock.js';
import { renameIntoPlace } from './rename-into-place.js';
import { canonicalBlobPath } from './validate-entry.js';
import { checkBlobsDirectoryOwn, type BlobsDirectoryKind } from './check-blobs-directory.js';

const MANIFEST = 'manifest.json';
const BLOBS = 'blobs';
const LOCK = 'lock';

export function journalFileName(generation: number): string {
  return `journal.${generation}`;
}

/** Temp names carry the writer's pid so gc can tell a live writer's file from a dead one's. */
export function tempName(suffix = ''): string {
  // The pid space tag: only a writer of this host, boot and pid namespace can be judged dead by its pid.
  return `.tmp-${process.pid}-${createToken()}.${pidSpaceTag()}${suffix}`;
}

async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The whole of `bytes`, in pieces (io-pieces.ts: a blob may be above Node's 2 GiB per call). */
async function writeAll(handle: FileHandle, bytes: Uint8Array, positionBytes: number | null): Promise<void> {
  await writeFully(async (source, offset, length, position) => (await handle.write(source, offset, length, position)).bytesWritten, bytes, positionBytes);
}

/** A FileHandle as a positioned read for readFully. */
function handleReader(handle: FileHandle): ReadAt {
  return async (target, offset, length, position) => (await handle.read(target, offset, length, position)).bytesRead;
}

const BLOB_OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/**
 * The manifest and journals are opened the same way (links allowed): a FIFO planted in place of one
 * opens at once instead of hanging a thread-pool thread for good, then fails the regular-file check.
 */
const FILE_READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;
/** The journal's writer: O_RDWR never blocks on a FIFO either, and the file is checked before use. */
const FILE_WRITE_FLAGS = constants.O_RDWR | constants.O_NONBLOCK;

// Descriptor-level calls (not FileHandle): a blob's descriptor outlives the read that opened it.
const openAsync = promisify(openFd) as (path: string, flags: number) => Promise<number>;
const fstatAsync = promisify(fstatFd);
const closeAsync = promisify(closeFd);
const readAsync = (fd: number, target: Uint8Array, offset: number, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) => readFd(fd, target, offset, length, position, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead))));

function blobLinkError(key: string, path: string): StoreError {
  return new StoreError('UNSAFE_BLOB_PATH', 'blob is a link (the store never writes links)', { entry: key, path, details: { reason: 'link' } });
}

function blobOpenError(error: unknown, key: string, path: string): StoreError {
  const errno = errnoCode(error);
  if (errno === 'ENOENT') return new StoreError('BLOB_MISSING', 'the blob file does not exist', { entry: key, path });
  if (errno === 'ELOOP') return blobLinkError(key, path);
  return toIoError(error, 'cannot open the blob', { entry: key, path });
}

/** A blob file that ended after `readBytes` of the `expectedBytes` the manifest gives it. */
function shortBlobError(readBytes: number, expectedBytes: number, path: string): StoreError {
  return new StoreError('BLOB_SIZE_MISMATCH', `file ended after ${readBytes} bytes, ${expectedBytes} expected`, { path, details: { readBytes, expectedBytes } });
}

/** A failed blob read as the store reports it: its own errors with the entry added, anything else as an I/O error naming the blob. */
function blobReadError(error: unknown, key: string, path: string): Error {
  return error instanceof StoreError ? error.withContext({ entry: key }) : toIoError(error, 'cannot read the blob', { entry: key, path });
}

/** An opened blob must be a regular file of exactly the manifest's size. */
function checkBlobFile(info: { isFile(): boolean; size: number }, expectedBytes: number, key: string, path: string): void {
  if (!info.isFile()) {
    throw new StoreError('UNSAFE_BLOB_PATH', 'blob is not a regular file', { entry: key, path, details: { reason: 'not-a-file' } });
  }
  if (info.size !== expectedBytes) {
    throw new StoreError('BLOB_SIZE_MISMATCH', `blob file holds ${info.size} bytes, the manifest says ${expectedBytes}`, {
      entry: key,
      path,
      details: { fileBytes: info.size, expectedBytes },
    });
  }
}

class FsJournalFile implements JournalFile {
  private writer: FileHandle | undefined;

  constructor(
    readonly generation: number,
    readonly path: string,
    private readonly reader: FileHandle,
  ) {}

  async size(): Promise<number> {
    // A direct fstat (microseconds): every load's refresh asks, and a thread-pool round trip cost
    // the loading thread ~0.2 ms of the default model's 12 ms paced load.
    try {
      return fstatSync(this.reader.fd).size;
    } catch (error) {
      throw toIoError(error, 'cannot stat the journal', { path: this.path });
    }
  }

  async read(offsetBytes: number, lengthBytes: number): Promise<Uint8Array> {
    const bytes = new Uint8Array(lengthBytes);
    let done: number;
    try {
      done = await readFully(handleReader(this.reader), bytes, offsetBytes);
    } catch (error) {
      throw toIoError(error, 'cannot read the journal', { path: this.path });
    }
    return done === lengthBytes ? bytes : bytes.subarray(0, done);
  }

  linkCount(): number {
    try {
      return fstatSync(this.reader.fd).nlink;
    } catch (error) {
      throw toIoError(error, 'cannot stat the journal', { path: this.path });
    }
  }

  peek(offsetBytes: number, lengthBytes: number): Uint8Array {
    const bytes = new Uint8Array(lengthBytes);
    let done: number;
    try {
      done = readSync(this.reader.fd, bytes, 0, lengthBytes, offsetBytes);
    } catch (error) {
      throw toIoError(error, 'cannot read the journal', { path: this.path });
    }
    return done === lengthBytes ? bytes : bytes.subarray(0, done);
  }

  private async writable(): Promise<FileHandle> {
    // Readers may lack write permission; open for writing only when a writer needs it.
    if (this.writer) return this.writer;
    let handle: FileHandle;
    try {
      handle = await open(this.path, FILE_WRITE_FLAGS);
    } catch (error) {
      throw toWriteError(error, 'cannot open the journal for writing', { path: this.path });
    }
    try {
      // Appends go to the very file whose records were read (and checked): nothing else at that path.
      const [info, read] = await Promise.all([handle.stat(), this.reader.stat()]);
      if (!info.isFile() || info.dev !== read.dev || info.ino !== read.ino) {
        throw new StoreError('JOURNAL_INVALID', 'the journal path no longer names the regular file this handle read', {
          path: this.path,
          details: { reason: info.isFile() ? 'replaced' : 'not-a-file' },
        });
      }
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw toIoError(error, 'cannot open the journal for writing', { path: this.path });
    }
    this.writer = handle;
    return handle;
  }

  async append(offsetBytes: number, bytes: Uint8Array): Promise<void> {
    const handle = await this.writable();
    try {
      await writeAll(handle, bytes, offsetBytes);
      await handle.datasync();
    } catch (error) {
      throw toWriteError(error, 'cannot append to the journal', { path: this.path });
    }
  }

  async truncate(lengthBytes: number): Promise<void> {
    const handle = await this.writable();
    try {
      await handle.truncate(lengthBytes);
      await handle.sync();
    } catch (error) {
      throw toWriteError(error, 'cannot cut the journal\'s torn tail', { path: this.path });
    }
  }

  async close(): Promise<void> {
    const writer = this.writer;
    this.writer = undefined;
    try {
      await writer?.close();
    } finally {
      await this.reader.close(); // also when the writer's close failed
    }
  }
}

/** The filesystem backend: `<root>/manifest.json`, `<root>/journal.<G>`, `<root>/blobs/<key>.bin`, `<root>/lock`. */
// Its writes' failures go through toWriteError (a refused one is NOT_WRITABLE, as the lock's), its reads' toIoError.
export class FsBackend implements StorageBackend {
  private blobsRealPath: string | undefined;
  /** Set by releaseFiles (the store closed): no descriptor is kept after that. */
  private released = false;
  /** Staged blobs already renamed to their final name: nothing left to discard. */
  private readonly published = new WeakSet<StagedBlob>();

  constructor(readonly root: string) {}

  describe(name: string): string {
    return join(this.root, name);
  }

  async ensureLayout(): Promise<void> {
    await this.makeLayoutDirectories([this.root, join(this.root, BLOBS)]);
  }

  /**
   * Makes the root alone (blobs/ is ensureLayout's): a cache's creator takes its writer lock right
   * after, so that a reader never finds the directory without a sign of who is creating it.
   */
  async ensureRoot(): Promise<void> {
    await this.makeLayoutDirectories([this.root]);
  }

  private async makeLayoutDirectories(paths: string[]): Promise<void> {
    // One level at a time: a recursive mkdir reports ENOENT for any failure below the first level
    // (ENOSPC, EIO), losing the cause.
    for (const path of paths) {
      try {
        await mkdir(path);
      } catch (error) {
        if (errnoCode(error) === 'EEXIST') {
          const info = await stat(path).catch(() => undefined);
          if (info?.isDirectory()) continue;
          throw new StoreError('IO_ERROR', 'cannot create the cache directories [ENOTDIR]', { path, details: { errno: 'ENOTDIR' } });
        }
        if (path === this.root && errnoCode(error) === 'ENOENT') {
          await mkdir(path, { recursive: true }).catch((cause: unknown) => {
            throw toWriteError(cause, 'cannot create the cache directories', { path });
          });
          continue;
        }
        throw toWriteError(error, 'cannot create the cache directories', { path });
      }
    }
  }

  /** Makes blobs/ again under an existing root, durably (its name in the root synced). */
  private async restoreBlobsDirectory(): Promise<void> {
    const path = join(this.root, BLOBS);
    await mkdir(path).catch((error: unknown) => {
      if (errnoCode(error) !== 'EEXIST') throw error;
    });
    await syncDirectory(this.root);
  }

  manifestIdentity(): string | undefined {
    try {
      const info = statSync(join(this.root, MANIFEST), { bigint: true, throwIfNoEntry: false });
      return info === undefined ? undefined : `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}`;
    } catch {
      return undefined;
    }
  }

  async readManifest(): Promise<Uint8Array | undefined> {
    const path = join(this.root, MANIFEST);
    let handle: FileHandle;
    try {
      handle = await open(path, FILE_READ_FLAGS);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return undefined;
      // The cache path names a file (or passes through one): not a cache, said as such, naming the
      // path given (not `<it>/manifest.json`: for a cache's own manifest.json that read
      // `.../manifest.json/manifest.json`).
      if (errnoCode(error) === 'ENOTDIR') {
        const manifestGiven = basename(this.root) === MANIFEST;
        throw new StoreError(
          'NOT_A_CACHE',
          `the cache path is a file, not a directory: pass the cache directory${manifestGiven ? ` (${dirname(this.root)}, not its ${MANIFEST})` : ''}`,
          { path: this.root },
        );
      }
      throw toIoError(error, 'cannot open the manifest', { path });
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) {
        throw new StoreError('MANIFEST_INVALID', 'manifest.json is not a regular file', { path, details: { reason: 'not-a-file' } });
      }
      const { size } = info;
      if (size > MAX_MANIFEST_BYTES) {
        throw new StoreError('SIZE_INVALID', `manifest is ${size} bytes, above MAX_MANIFEST_BYTES (${MAX_MANIFEST_BYTES})`, {
          path,
          details: { manifestBytes: size, limit: MAX_MANIFEST_BYTES },
        });
      }
      const bytes = new Uint8Array(size);
      return bytes.subarray(0, await readFully(handleReader(handle), bytes, 0));
    } catch (error) {
      throw toIoError(error, 'cannot read the manifest', { path });
    } finally {
      await handle.close();
    }
  }

  async writeManifest(bytes: Uint8Array): Promise<void> {
    const temp = join(this.root, tempName('.manifest'));
    const path = join(this.root, MANIFEST);
    try {
      const handle = await open(temp, 'wx', 0o644);
      try {
        await writeAll(handle, bytes, 0);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
      await syncDirectory(this.root);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw toWriteError(error, 'cannot write the manifest', { path });
    }
  }

  async openJournal(generation: number): Promise<JournalFile | undefined> {
    const path = join(this.root, journalFileName(generation));
    let handle: FileHandle;
    try {
      handle = await open(path, FILE_READ_FLAGS);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return undefined;
      throw toIoError(error, 'cannot open the journal', { path });
    }
    try {
      if (!(await handle.stat()).isFile()) {
        throw new StoreError('JOURNAL_INVALID', 'the journal is not a regular file', { path, details: { reason: 'not-a-file' } });
      }
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw toIoError(error, 'cannot open the journal', { path });
    }
    return new FsJournalFile(generation, path, handle);
  }

  async createJournal(generation: number, header: Uint8Array): Promise<void> {
    const path = join(this.root, journalFileName(generation));
    // A temp file renamed over the name: whatever was there (a stale journal, a FIFO that an open
    // for writing would block on) is replaced, never written through.
    const temp = join(this.root, tempName('.journal'));
    try {
      const handle = await open(temp, 'wx', 0o644);
      try {
        await writeAll(handle, header, 0);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, path);
      await syncDirectory(this.root);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw toWriteError(error, 'cannot create the journal', { path });
    }
  }

  keepJournalCopy(generation: number, name: string): Promise<string> {
    return this.keepCopy(journalFileName(generation), name, 'cannot keep a copy of the damaged journal');
  }

  keepManifestCopy(name: string): Promise<string> {
    return this.keepCopy(MANIFEST, name, 'cannot keep a copy of the damaged manifest');
  }

  /** A second name for a file of the root, durably: a hard link, or a copy where links fail (never over a name). */
  private async keepCopy(fromName: string, name: string, what: string): Promise<string> {
    const from = join(this.root, fromName);
    const to = join(this.root, name);
    try {
      // A hard link costs nothing; a file system without them gets a copy (never over a name).
      await link(from, to).catch(async (error: unknown) => {
        if (errnoCode(error) === 'EEXIST') throw error;
        await copyFile(from, to, constants.COPYFILE_EXCL);
      });
      await syncDirectory(this.root);
    } catch (error) {
      throw toWriteError(error, what, { path: from });
    }
    return to;
  }

  async removeJournal(generation: number): Promise<void> {
    const path = join(this.root, journalFileName(generation));
    await unlink(path).catch((error) => {
      if (errnoCode(error) !== 'ENOENT') throw toWriteError(error, 'cannot remove the old journal', { path });
    });
  }

  async stageBlob(key: string, payload: Uint8Array, onWritten?: () => void): Promise<StagedBlob> {
    // Never into a blobs/ that is not this cache's own directory: callers check first
    // (checkBlobsDirectoryOwn); this is the last line, as in publishStagedBlob.
    await checkBlobsDirectoryOwn(this, 'writing a blob');
    const name = tempName('.bin');
    const path = join(this.root, BLOBS, name);
    try {
      const handle = await open(path, 'wx', 0o644).catch(async (error: unknown) => {
        // blobs/ itself gone (removed by hand, left out of a copy): made again as a new cache's is,
        // so that `build --repair` can put the blobs back, as verify says (it failed ENOENT, for good).
        if (errnoCode(error) !== 'ENOENT') throw error;
        await this.restoreBlobsDirectory();
        return open(path, 'wx', 0o644);
      });
      try {
        await writeAll(handle, payload, 0);
        // The bytes are in the page cache: the caller may reuse the payload's memory during the fsync.
        if (onWritten) callHook(onWritten);
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      await unlink(path).catch(() => undefined);
      throw toWriteError(error, 'cannot write the blob', { entry: key, path });
    }
    return { key, tempName: name };
  }

  async publishStagedBlob(staged: StagedBlob): Promise<void> {
    const from = join(this.root, BLOBS, staged.tempName);
    const to = join(this.root, BLOBS, `${staged.key}.bin`);
    // The rename replaces the name: through another cache's blobs/, its blob of this key (another encoding).
    await checkBlobsDirectoryOwn(this, 'publishing a blob');
    try {
      // Replaces an uncommitted leftover, a planted link (never its target) or a directory (moved aside).
      await renameIntoPlace(from, to);
      this.published.add(staged);
    } catch (error) {
      throw toWriteError(error, 'cannot publish the blob', { entry: staged.key, path: to });
    }
  }

  async syncBlobNames(): Promise<void> {
    const path = join(this.root, BLOBS);
    try {
      await syncDirectory(path);
    } catch (error) {
      throw toWriteError(error, 'cannot sync the blobs directory', { path });
    }
  }

  async discardStagedBlob(staged: StagedBlob): Promise<void> {
    if (this.published.has(staged)) return;
    await unlink(join(this.root, BLOBS, staged.tempName)).catch(() => undefined);
  }

  private async blobsDirectory(): Promise<string> {
    if (this.blobsRealPath === undefined) {
      try {
        this.blobsRealPath = await realpath(join(this.root, BLOBS));
      } catch (error) {
        if (errnoCode(error) === 'ENOENT') {
          throw new StoreError('BLOB_MISSING', 'the cache has no blobs directory', { path: join(this.root, BLOBS) });
        }
        throw toIoError(error, 'cannot resolve the blobs directory', { path: join(this.root, BLOBS) });
      }
    }
    return this.blobsRealPath;
  }

  /**
   * Where a blob is opened: manifest entries only ever name blobs/<key>.bin (validateBlobPath), so
   * the file is opened by name inside the blobs directory's real path (resolved once): with
   * O_NOFOLLOW nothing but a regular file there can be opened, without a realpath call per read.
   * O_NONBLOCK: a FIFO planted there opens at once instead of hanging (and fails the file check).
   */
  private blobTarget(key: string, blob: string, blobsDir: string): { path: string; resolved: string } {
    const path = join(this.root, blob);
    if (blob !== canonicalBlobPath(key)) {
      throw new StoreError('UNSAFE_BLOB_PATH', `blob path ${blob} is not ${canonicalBlobPath(key)}`, { entry: key, path, details: { reason: 'not-canonical' } });
    }
    return { path, resolved: join(blobsDir, blob.slice(BLOBS.length + 1)) };
  }

  /**
   * Reads through the descriptor kept by an earlier read of the blob (open-blob-files.ts), else
   * opens it (asynchronously: the disk may be slow) and keeps it after a full read. One
   * thread-pool round trip instead of four (open, fstat, read, close: a page-cache load of the
   * default model with the CPU backend spent ~0.7 ms of 5.5 ms in the other three).
   */
  async readBlobInto(key: string, blob: string, target: Uint8Array): Promise<void> {
    const { path, resolved } = this.blobTarget(key, blob, await this.blobsDirectory());
    let fd = takeOpenBlobFile(resolved, target.length);
    if (fd === undefined) {
      try {
        fd = await openSheddingKeptAsync(() => openAsync(resolved, BLOB_OPEN_FLAGS));
      } catch (error) {
        throw blobOpenError(error, key, path);
      }
      try {
        checkBlobFile(await fstatAsync(fd), target.length, key, path);
      } catch (error) {
        await closeAsync(fd).catch(() => undefined);
        throw blobReadError(error, key, path);
      }
    }
    let keep = false;
    try {
      // In pieces: a blob of 2-4 GiB is valid, and Node refuses one read that long.
      const done = await readFully((into, offset, length, position) => readAsync(fd, into, offset, length, position), target, 0);
      if (done < target.length) throw shortBlobError(done, target.length, path);
      keep = true;
    } catch (error) {
      throw blobReadError(error, key, path);
    } finally {
      // Not kept once the store closed meanwhile: releaseFiles has run, and nothing would close it.
      if (keep && !this.released) keepOpenBlobFile(resolved, fd, target.length);
      else await closeAsync(fd).catch(() => undefined);
    }
  }

  /**
   * readBlobInto with synchronous system calls (same checks, same errors): see CacheStore.readBlobSync.
   * The file stays open for the next read of the same blob (open-blob-files.ts): blobs are
   * content-addressed and never written in place, so a kept descriptor reads the same bytes as the
   * path would, and one that fails a check is closed (forgetBlob), so a repaired file is opened anew.
   */
  readBlobIntoSync(key: string, blob: string, target: Uint8Array): void {
    const { path, resolved } = this.blobTarget(key, blob, this.blobsDirectorySync());
    const fd = takeOpenBlobFile(resolved, target.length) ?? this.openChecked(key, path, resolved, target.length);
    let keep = false;
    try {
      const done = readFullySync((into, offset, length, position) => readSync(fd, into, offset, length, position), target, 0);
      if (done < target.length) throw shortBlobError(done, target.length, path);
      keep = true;
    } catch (error) {
      throw blobReadError(error, key, path);
    } finally {
      if (keep && !this.released) keepOpenBlobFile(resolved, fd, target.length);
      else closeQuietly(fd);
    }
  }

  /** See BlobRangeSource.openBlobRanges: verify's bounded reads of a large payload (the descriptor is not kept). */
  async openBlobRanges(key: string, blob: string, expectedBytes: number): Promise<BlobRangeReader> {
    const { path, resolved } = this.blobTarget(key, blob, await this.blobsDirectory());
    let fd: number;
    try {
      fd = await openSheddingKeptAsync(() => openAsync(resolved, BLOB_OPEN_FLAGS));
    } catch (error) {
      throw blobOpenError(error, key, path);
    }
    try {
      checkBlobFile(await fstatAsync(fd), expectedBytes, key, path);
    } catch (error) {
      await closeAsync(fd).catch(() => undefined);
      throw blobReadError(error, key, path);
    }
    return {
      read: async (target, position) => {
        try {
          const done = await readFully((into, offset, length, at) => readAsync(fd, into, offset, length, at), target, position);
          if (done < target.length) throw shortBlobError(position + done, expectedBytes, path);
        } catch (error) {
          throw blobReadError(error, key, path);
        }
      },
      close: () => closeAsync(fd).catch(() => undefined),
    };
  }

  /** See StorageBackend.checkBlob: an lstat of the path readBlobInto opens, with its checks. */
  async checkBlob(key: string, blob: string, expectedBytes: number): Promise<void> {
    const { path, resolved } = this.blobTarget(key, blob, await this.blobsDirectory());
    let info;
    try {
      info = await lstat(resolved);
    } catch (error) {
      throw blobOpenError(error, key, path);
    }
    if (info.isSymbolicLink()) throw blobLinkError(key, path);
    checkBlobFile(info, expectedBytes, key, path);
  }

  /** See StorageBackend.forgetBlob: the kept descriptor of this blob, if any, is closed. */
  forgetBlob(key: string, blob: string): void {
    if (this.blobsRealPath === undefined || blob !== canonicalBlobPath(key)) return;
    forgetOpenBlobFile(this.blobTarget(key, blob, this.blobsRealPath).resolved);
  }

  /** See StorageBackend.releaseFiles: every kept descriptor of this cache's blobs is closed. */
  releaseFiles(): void {
    // A read still in flight (close() does not wait for reads) then closes its descriptor itself
    // instead of keeping it: kept after this point, nothing would ever close it.
    this.released = true;
    const dir = this.blobsRealPath;
    if (dir === undefined) return;
    forgetOpenBlobFiles((path) => path.startsWith(`${dir}/`));
  }

  private blobsDirectorySync(): string {
    if (this.blobsRealPath === undefined) {
      try {
        this.blobsRealPath = realpathSync(join(this.root, BLOBS));
      } catch (error) {
        if (errnoCode(error) === 'ENOENT') throw new StoreError('BLOB_MISSING', 'the cache has no blobs directory', { path: join(this.root, BLOBS) });
        throw toIoError(error, 'cannot resolve the blobs directory', { path: join(this.root, BLOBS) });
      }
    }
    return this.blobsRealPath;
  }

  /**
   * See StorageBackend.openBlobSync: the checks of readBlobIntoSync, the descriptor left open (the
   * one a previous read kept, if any); `release(true)` keeps it for the next read.
   */
  openBlobSync(key: string, blob: string, expectedBytes: number): OpenedBlobFile {
    const { path, resolved } = this.blobTarget(key, blob, this.blobsDirectorySync());
    const fd = takeOpenBlobFile(resolved, expectedBytes) ?? this.openChecked(key, path, resolved, expectedBytes);
    let held = true;
    const isReleased = (): boolean => this.released;
    return {
      fd,
      path,
      release(keep: boolean) {
        if (!held) return;
        held = false;
        if (keep && !isReleased()) keepOpenBlobFile(resolved, fd, expectedBytes);
        else closeQuietly(fd);
      },
    };
  }

  /** Opens a blob file by its resolved path and checks it is a regular file of `expectedBytes`. */
  private openChecked(key: string, path: string, resolved: string, expectedBytes: number): number {
    let fd: number;
    try {
      fd = openSheddingKept(() => openSync(resolved, BLOB_OPEN_FLAGS));
    } catch (error) {
      throw blobOpenError(error, key, path);
    }
    try {
      checkBlobFile(fstatSync(fd), expectedBytes, key, path);
    } catch (error) {
      closeQuietly(fd);
      throw blobReadError(error, key, path);
    }
    return fd;
  }

  async acquireWriteLock(timeoutMs: number, signal?: AbortSignal): Promise<HeldLock> {
    const lock = await acquireLock(join(this.root, LOCK), { timeoutMs, signal });
    // Lock attempts of killed processes (a loader killed while taking the lock): swept here, as
    // no build or gc may ever run on a cache only loaders use. Never throws.
    await removeAbandonedLockTemps(lock.path);
    return lock;
  }

  async listFiles(only?: (name: string) => boolean, { rootOnly = false }: { rootOnly?: boolean } = {}): Promise<StoredFile[]> {
    const out: StoredFile[] = [];
    for (const file of await this.listNames(only, rootOnly)) {
      const stored = await this.statFile(file);
      if (stored !== undefined) out.push(stored);
    }
    return out;
  }

  listFileNames(): Promise<ListedFile[]> {
    return this.listNames(undefined, false);
  }

  /** The root's names (and blobs/'s, unless `rootOnly`) that `only` accepts, typed as the directory lists them (Node lstats a name of unknown type itself). */
  private async listNames(only: ((name: string) => boolean) | undefined, rootOnly: boolean): Promise<ListedFile[]> {
    const out: ListedFile[] = [];
    for (const dir of rootOnly ? ([''] as const) : (['', BLOBS] as const)) {
      let entries: { name: string; isFile: boolean }[] | undefined;
      try {
        entries = await listTypedNames(join(this.root, dir));
      } catch (error) {
        throw toIoError(error, 'cannot list the cache', { path: join(this.root, dir) });
      }
      if (entries === undefined) continue;
      for (const entry of entries) {
        if (dir === '' && entry.name === BLOBS) continue;
        if (only !== undefined && !only(entry.name)) continue;
        out.push({ dir, name: entry.name, isFile: entry.isFile });
      }
    }
    return out;
  }

  async statFile(file: ListedFile): Promise<StoredFile | undefined> {
    const path = join(this.root, file.dir, file.name);
    try {
      const info = await lstat(path);
      return { dir: file.dir, name: file.name, sizeBytes: info.size, mtimeMs: info.mtimeMs, isFile: info.isFile() };
    } catch (error) {
      // Removed since it was listed (another gc, a writer's temp file renamed into place).
      if (errnoCode(error) === 'ENOENT') return undefined;
      throw toIoError(error, 'cannot stat a cache file', { path });
    }
  }

  async describeBlobsDirectory(): Promise<{ kind: BlobsDirectoryKind; target?: string }> {
    const path = join(this.root, BLOBS);
    let info;
    try {
      info = await lstat(path);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return { kind: 'missing' };
      throw toIoError(error, 'cannot stat the blobs directory', { path });
    }
    if (info.isDirectory()) return { kind: 'directory' };
    if (!info.isSymbolicLink()) return { kind: 'other' };
    const target = await readlink(path).catch(() => undefined);
    return target === undefined ? { kind: 'link' } : { kind: 'link', target };
  }

  async removeFile(file: ListedFile): Promise<void> {
    const path = join(this.root, file.dir, file.name);
    // Never through a blobs/ that is not this cache's own directory (a link to another cache's):
    // every caller checks first (checkBlobsDirectoryOwn); this is the last line, per file.
    if (file.dir === BLOBS) await checkBlobsDirectoryOwn(this, 'removing a blob');
    // An old journal goes only once the manifest that replaced it is durably named: its compaction
    // may have failed at that very directory sync, and a crash that lost the rename would leave the
    // old manifest without the journal holding its last commits.
    if (file.dir === '' && /^journal\.\d+$/.test(file.name)) {
      try {
        await syncDirectory(this.root);
      } catch (error) {
        throw toWriteError(error, 'cannot sync the cache directory before removing an old journal', { path: this.root });
      }
    }
    // A removed blob is not read through a kept descriptor afterwards.
    if (file.dir === BLOBS && this.blobsRealPath !== undefined) {
      forgetOpenBlobFile(join(this.blobsRealPath, file.name));
    }
    try {
      await rm(path, { force: true });
    } catch (error) {
      throw toWriteError(error, 'cannot remove a cache file', { path });
    }
  }

  isLockFileStale(file: ListedFile): Promise<boolean> {
    return isLockFileStale(join(this.root, file.dir, file.name));
  }
}

/**
 * A directory's names with whether each is a plain file, or undefined when the directory does not
 * exist. Where the file system gives no types in its listing (ext4 without `filetype`, XFS with
 * ftype=0, many FUSE and NFS mounts) Node lstats each name itself and rejects the whole listing with
 * ENOENT when one of them is gone by then (a lock or temp file renamed away): read as "no such
 * directory", that hid journals and orphan blobs from gc and from the newer-journal check. So an
 * ENOENT is followed by a plain listing and an lstat per name, a name gone meanwhile skipped.
 */
async function listTypedNames(path: string): Promise<{ name: string; isFile: boolean }[] | undefined> {
  try {
    return (await readdir(path, { withFileTypes: true })).map((entry) => ({ name: entry.name, isFile: entry.isFile() }));
  } catch (error) {
    if (errnoCode(error) !== 'ENOENT') throw error;
  }
  let names: string[];
  try {
    names = await readdir(path);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw error;
  }
  const out: { name: string; isFile: boolean }[] = [];
  for (const name of names) {
    try {
      out.push({ name, isFile: (await lstat(join(path, name))).isFile() });
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
    }
  }
  return out;
}
