import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { MAX_READ_CHUNK_BYTES } from './limits.js';

/** A unique temp name in the destination's own directory (so rename() stays on one file system). */
export function temporaryPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
}

/**
 * Writes all of `bytes` at `position`, retrying short writes. One write asks for at most
 * MAX_READ_CHUNK_BYTES: Node refuses a write length above 2^31 - 1 (ERR_OUT_OF_RANGE), so a
 * tensor of 2 GiB or more could not be written.
 */
export async function writeFully(handle: Pick<FileHandle, 'write'>, bytes: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, Math.min(bytes.length - done, MAX_READ_CHUNK_BYTES), position + done);
    done += bytesWritten;
  }
}

/**
 * Makes a finished temp file durable under its final name: fsync the data, close, rename over the
 * destination, fsync the directory (so the rename itself survives a crash).
 */
export async function commitTemporaryFile(handle: FileHandle, temporaryPath: string, path: string): Promise<void> {
  await handle.sync();
  await handle.close();
  await rename(temporaryPath, path);
  await syncDirectory(dirname(path));
}

export async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch (error) {
    // Some file systems cannot fsync a directory; the rename has still happened.
    const code = (error as NodeJS.ErrnoException)?.code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM' && code !== 'EBADF') throw error;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** Best-effort cleanup after a failure; never throws. */
export async function discardTemporaryFile(handle: FileHandle | undefined, temporaryPath: string): Promise<void> {
  await handle?.close().catch(() => undefined);
  await unlink(temporaryPath).catch(() => undefined);
}

/** Atomically replaces `path` with `bytes`. */
export async function writeFileAtomic(path: string, bytes: Uint8Array): Promise<void> {
  const temporaryPath = temporaryPathFor(path);
  const handle = await open(temporaryPath, 'wx');
  try {
    await writeFully(handle, bytes, 0);
    await commitTemporaryFile(handle, temporaryPath, path);
  } catch (error) {
    await discardTemporaryFile(handle, temporaryPath);
    throw error;
  }
}
