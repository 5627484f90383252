import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { describeError, describeSystemCode, NO_SPACE_CODES, systemErrorCode } from './describe-error.js';
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
      throw cacheDirError(cacheDir, error);
    });
    if (info) {
      if (!info.isDirectory()) throw cacheDirError(cacheDir, Object.assign(new Error(`${current} is not a directory`), { code: 'ENOTDIR' }));
      break;
    }
    missing.unshift(current);
    if (dirname(current) === current) break;
  }
  for (const path of missing) {
    await mkdir(path).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw cacheDirError(cacheDir, error);
    });
  }
}

/** The error for a cache directory that cannot be made or used: NO_SPACE or NOT_WRITABLE. */
export function cacheDirError(cacheDir: string, cause: NodeJS.ErrnoException): BuilderError {
  const reason = cause.syscall ? describeError(cause) : cause.message;
  // A full disk or quota is no permission problem: the same NO_SPACE as a write that fills it.
  const system = systemErrorCode(cause);
  if (system !== undefined && NO_SPACE_CODES.has(system)) {
    return new BuilderError('NO_SPACE', `cannot create the cache directory ${cacheDir}: ${describeSystemCode(system)}`, { file: cacheDir }, { cause });
  }
  return new BuilderError('NOT_WRITABLE', `cannot write the cache directory ${cacheDir}: ${reason}`, { file: cacheDir }, { cause });
}
