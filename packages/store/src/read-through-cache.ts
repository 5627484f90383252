import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, toIoError } from './errors.js';

/**
 * A per-host directory of blobs fetched from an object store, named like the objects
 * (`<key>.<blob sha256>.bin`, so one directory may serve many caches). Files are written atomically
 * (temp file, fsync, rename) and never trusted: the store checks every byte (payload checksum)
 * after reading one, and a file that fails is removed and fetched again.
 */
export class ReadThroughCache {
  private ready: Promise<void> | undefined;

  constructor(readonly dir: string) {}

  private fileName(key: string, blobSha256: string): string {
    return join(this.dir, `${key}.${blobSha256}.bin`);
  }

  /** Reads the file into target if it exists with exactly target.length bytes; false otherwise. */
  async readInto(key: string, blobSha256: string, target: Uint8Array): Promise<boolean> {
    let handle;
    try {
      handle = await open(this.fileName(key, blobSha256), constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return false;
      throw toIoError(error, 'cannot open a read-through file', { entry: key, path: this.fileName(key, blobSha256) });
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile() || stat.size !== target.length) return false;
      let at = 0;
      while (at < target.length) {
        const { bytesRead } = await handle.read(target, at, target.length - at, at);
        if (bytesRead === 0) return false;
        at += bytesRead;
      }
      return true;
    } finally {
      await handle.close();
    }
  }

  /** Stores a verified blob (temp file, fsync, rename). Errors are the caller's to ignore. */
  async write(key: string, blobSha256: string, bytes: Uint8Array): Promise<void> {
    this.ready ??= mkdir(this.dir, { recursive: true }).then(() => undefined);
    await this.ready;
    const temp = join(this.dir, `.tmp-${process.pid}-${randomBytes(6).toString('hex')}.bin`);
    const handle = await open(temp, 'wx', 0o644);
    try {
      let at = 0;
      while (at < bytes.length) at += (await handle.write(bytes, at, bytes.length - at, at)).bytesWritten;
      await handle.sync();
    } catch (error) {
      await handle.close();
      await unlink(temp).catch(() => undefined);
      throw error;
    }
    await handle.close();
    // No directory fsync: a rename lost to a power cut is only a cache miss.
    await rename(temp, this.fileName(key, blobSha256));
  }

  async remove(key: string, blobSha256: string): Promise<void> {
    await unlink(this.fileName(key, blobSha256)).catch(() => undefined);
  }
}
