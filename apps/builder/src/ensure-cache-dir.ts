import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { describeError } from './describe-error.js';
import { BuilderError } from './errors.js';

/**
 * Creates the cache directory one component at a time, so that the real reason a path cannot be
 * created surfaces (Node's recursive mkdir reports ENOENT on a read-only file system), and turns
 * it into one clear NOT_WRITABLE error naming the directory.
 */
export async function ensureCacheDir(cacheDir: string): Promise<void> {
  const missing: string[] = [];
  for (let current = resolve(cacheDir); ; current = dirname(current)) {
    const info = await stat(current).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw notWritable(cacheDir, error);
    });
    if (info) {
      if (!info.isDirectory()) throw notWritable(cacheDir, Object.assign(new Error(`${current} is not a directory`), { code: 'ENOTDIR' }));
      break;
    }
    missing.unshift(current);
    if (dirname(current) === current) break;
  }
  for (const path of missing) {
    await mkdir(path).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw notWritable(cacheDir, error);
    });
  }
}

function notWritable(cacheDir: string, cause: NodeJS.ErrnoException): BuilderError {
  const reason = cause.syscall ? describeError(cause) : cause.message;
  return new BuilderError('NOT_WRITABLE', `cannot write the cache directory ${cacheDir}: ${reason}`, { file: cacheDir }, { cause });
}
