import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { lstat, mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, toIoError } from './errors.js';
import { readFully, readFullySync, writeFully } from './io-pieces.js';
import { renameIntoPlace } from './rename-into-place.js';
import { isAbandonedTempFile, pidSpaceTag } from './write-lock.js';

/**
 * A temp file of writeFile: `.tmp-<pid>-<12 hex>.<tag>.bin`, where `<tag>` is pidSpaceTag(): a
 * directory shared by containers (which may share a host name but not pids) or over NFS would
 * otherwise see a live writer elsewhere as a dead pid here. Older names carry no tag.
 */
const TEMP_NAME = /^\.tmp-(\d+)-[0-9a-f]{12}(?:\.([0-9a-f]{8}))?\.bin$/;

/**
 * No links followed; O_NONBLOCK: a FIFO (or device) planted in the directory opens at once instead
 * of blocking the thread for good, then fails the regular-file check like any other garbage.
 */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Files up to this size are read with synchronous calls: the open, stat, reads and close of a small
 * local file cost four or five thread-pool round trips (~0.2-1 ms each on 2 busy cores) against
 * ~0.03 ms done at once, and a load reads dozens of them (an S3 model's uncached tensors and heads).
 * A 1 MiB read holds the event loop ~0.1 ms. The runtime's local small-blob reads use the same bound.
 */
export const READ_THROUGH_SYNC_MAX_BYTES = 1024 * 1024;

/**
 * A per-host directory of bytes fetched from an object store: cache blobs named like the objects
 * (`<key>.<blob sha256>.bin`, so one directory may serve many caches) and the raw object ranges of
 * `read-through-ranges.ts` (`range.<identity sha256>.bin`: an S3 model's heads and uncached tensors;
 * `object.<identity sha256>.bin`: a cache's entry objects, kept whole) and host file stamps
 * (`stamps.<shard name sha256>.bin`, host-file-stamps.ts). Files are written atomically (temp file,
 * fsync, rename). Fetched bytes are never trusted: the reader checks every byte (payload checksum,
 * or the range file's own SHA-256) after reading one, and a file that fails is removed and fetched
 * again. Host stamps are different: an intact one is taken as this host's record that a local file
 * holds a binding's bytes (what a local cache's journal holds), so the directory must be as
 * private to the host's loaders as a local cache would be.
 * Nothing here evicts: the directory grows with what was fetched; temp files of writers that died
 * are removed by the next handle that writes there.
 */
export class ReadThroughCache {
  private ready: Promise<void> | undefined;

  constructor(readonly dir: string) {}

  private blobFileName(key: string, blobSha256: string): string {
    return `${key}.${blobSha256}.bin`;
  }

  /** Reads the blob's file into target if it exists with exactly target.length bytes; false otherwise. */
  readInto(key: string, blobSha256: string, target: Uint8Array): Promise<boolean> {
    return this.readFileInto(this.blobFileName(key, blobSha256), [target], key);
  }

  /** True when the blob's file exists as a regular file of exactly `sizeBytes` (contents unchecked, as readInto's). */
  async hasBlob(key: string, blobSha256: string, sizeBytes: number): Promise<boolean> {
    const path = join(this.dir, this.blobFileName(key, blobSha256));
    try {
      const info = await stat(path);
      return info.isFile() && info.size === sizeBytes;
    } catch (error) {
      if (errnoCode(error) === 'ENOENT' || errnoCode(error) === 'ENOTDIR') return false;
      throw toIoError(error, 'cannot stat a read-through file', { entry: key, path });
    }
  }

  /** Stores a verified blob (temp file, fsync, rename). Errors are the caller's to ignore. */
  write(key: string, blobSha256: string, bytes: Uint8Array): Promise<void> {
    return this.writeFile(this.blobFileName(key, blobSha256), [bytes]);
  }

  remove(key: string, blobSha256: string): Promise<void> {
    return this.removeFile(this.blobFileName(key, blobSha256));
  }

  /**
   * Reads the file `name` (a plain name made by this package, no separators) into `parts`, one after
   * the other, if it exists with exactly their total length; false when it is absent, not a regular
   * file or of another size. Contents are unchecked: the caller verifies them.
   */
  async readFileInto(name: string, parts: readonly Uint8Array[], entry?: string): Promise<boolean> {
    const path = join(this.dir, name);
    const totalBytes = parts.reduce((sum, part) => sum + part.length, 0);
    if (totalBytes <= READ_THROUGH_SYNC_MAX_BYTES) return this.readFileIntoSync(path, parts, totalBytes, entry);
    let handle;
    try {
      handle = await open(path, READ_FLAGS);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT' || errnoCode(error) === 'ENOTDIR') return false;
      throw toIoError(error, 'cannot open a read-through file', { entry, path });
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile() || stat.size !== totalBytes) return false;
      let position = 0;
      for (const part of parts) {
        // In pieces: a part may be a blob above Node's 2 GiB per read.
        const bytesRead = await readFully(async (target, offset, length, at) => (await handle.read(target, offset, length, at)).bytesRead, part, position);
        if (bytesRead < part.length) return false;
        position += bytesRead;
      }
      return true;
    } finally {
      await handle.close();
    }
  }

  /** readFileInto for a small file, with synchronous calls (same answers, same errors). */
  private readFileIntoSync(path: string, parts: readonly Uint8Array[], totalBytes: number, entry?: string): boolean {
    let fd: number;
    try {
      fd = openSync(path, READ_FLAGS);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT' || errnoCode(error) === 'ENOTDIR') return false;
      throw toIoError(error, 'cannot open a read-through file', { entry, path });
    }
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile() || stat.size !== totalBytes) return false;
      let position = 0;
      for (const part of parts) {
        const bytesRead = readFullySync((target, offset, length, at) => readSync(fd, target, offset, length, at), part, position);
        if (bytesRead < part.length) return false;
        position += bytesRead;
      }
      return true;
    } finally {
      closeSync(fd);
    }
  }

  /**
   * The whole file `name` when it is a regular file of at most `maxBytes` (checked by fstat before
   * anything is allocated), with synchronous calls: for small files a synchronous lookup needs.
   * Undefined when absent, not a regular file, too large or unreadable for any reason: callers
   * treat such a file as absent (a lookup must not throw).
   */
  readSmallFileSync(name: string, maxBytes: number): Uint8Array | undefined {
    let fd: number;
    try {
      fd = openSync(join(this.dir, name), READ_FLAGS);
    } catch {
      return undefined;
    }
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile() || stat.size > maxBytes) return undefined;
      const bytes = new Uint8Array(stat.size);
      const bytesRead = readFullySync((target, offset, length, at) => readSync(fd, target, offset, length, at), bytes, 0);
      return bytesRead === bytes.length ? bytes : undefined;
    } catch {
      return undefined;
    } finally {
      closeSync(fd);
    }
  }

  /** Writes `parts` one after the other as the file `name`: temp file, fsync, rename. Errors are the caller's to ignore. */
  async writeFile(name: string, parts: readonly Uint8Array[]): Promise<void> {
    const temp = join(this.dir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}.${pidSpaceTag()}.bin`);
    let handle;
    try {
      await this.ensureDirectory();
      handle = await open(temp, 'wx', 0o644);
    } catch (error) {
      if (errnoCode(error) !== 'ENOENT') throw error;
      // The directory was removed since this handle made it (the README allows that at any time):
      // made again, or every later copy failed and each load fetched everything anew.
      this.ready = undefined;
      await this.ensureDirectory();
      handle = await open(temp, 'wx', 0o644);
    }
    try {
      let position = 0;
      for (const part of parts) {
        await writeFully(async (source, offset, length, at) => (await handle.write(source, offset, length, at)).bytesWritten, part, position);
        position += part.length;
      }
      await handle.sync();
    } catch (error) {
      await handle.close();
      await unlink(temp).catch(() => undefined);
      throw error;
    }
    await handle.close();
    // No directory fsync: a rename lost to a power cut is only a cache miss.
    await renameIntoPlace(temp, join(this.dir, name)).catch(async (error: unknown) => {
      await unlink(temp).catch(() => undefined);
      throw error;
    });
  }

  /** Creates the directory once per handle (again after a failure), then clears dead writers' temp files. */
  private ensureDirectory(): Promise<void> {
    this.ready ??= mkdir(this.dir, { recursive: true }).then(
      () => {
        // Not awaited: a directory of many copies takes a while to list, and nothing waits on it.
        this.removeDeadTempFiles().catch(() => undefined);
      },
      (error: unknown) => {
        this.ready = undefined; // the next write tries again (the directory may be fixed meanwhile)
        throw error;
      },
    );
    return this.ready;
  }

  /**
   * Removes temp files whose writer is gone: a process killed mid-write leaves its `.tmp-<pid>-…`
   * behind (up to a blob or a 64 MiB range each), and nothing else ever looks at them. The store's
   * gc rule (isAbandonedTempFile): a pid of this host that is dead, or older than TEMP_FILE_MAX_AGE_MS.
   */
  private async removeDeadTempFiles(): Promise<void> {
    for (const name of await readdir(this.dir)) {
      const temp = TEMP_NAME.exec(name);
      if (temp === null) continue;
      const path = join(this.dir, name);
      const info = await lstat(path).catch(() => undefined);
      if (info === undefined || !info.isFile()) continue;
      if (isAbandonedTempFile(Number(temp[1]), info.mtimeMs, temp[2] === pidSpaceTag())) await unlink(path).catch(() => undefined);
    }
  }

  async removeFile(name: string): Promise<void> {
    await unlink(join(this.dir, name)).catch(() => undefined);
  }
}
