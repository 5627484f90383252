import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { BenchSummaryError } from './errors.mjs';

/**
 * Temp file in the same folder, fsync, rename, fsync the folder: a reader (or a crash) sees the old
 * file or the new one, never half of one. Internal to this package.
 */
export function writeFileAtomic(path, text) {
  const dir = dirname(path);
  // The temp name does not end in .json, so readers of the folder never pick it up.
  const tempPath = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    mkdirSync(dir, { recursive: true });
    const fd = openSync(tempPath, 'wx');
    try {
      const bytes = Buffer.from(text, 'utf8');
      let offset = 0;
      while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tempPath, path);
    syncDir(dir);
  } catch (error) {
    removeQuietly(tempPath);
    throw new BenchSummaryError('IO_ERROR', `could not write ${path}: ${error.message}`, { file: path, errno: error.code }, error);
  }
}

function removeQuietly(path) {
  try {
    rmSync(path, { force: true });
  } catch {
    // The temp file never existed (e.g. its folder is not a folder): nothing to clean up.
  }
}

function syncDir(dir) {
  // Windows cannot open a folder for fsync; the rename is as durable as it gets there.
  if (process.platform === 'win32') return;
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
