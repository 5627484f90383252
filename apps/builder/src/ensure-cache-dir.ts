import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { checkNotHubRepo } from './check-not-hub-repo.js';
import { describeError, describeSystemCode, NO_SPACE_CODES, systemErrorCode } from './describe-error.js';
import { BuilderError } from './errors.js';
import { checkNotDanglingLink } from './find-dangling-link.js';

/**
 * Creates the cache directory's missing parents one component at a time, so that the real reason
 * a path cannot be created surfaces (Node's recursive mkdir reports ENOENT on a read-only file
 * system), and turns it into one clear NOT_WRITABLE error naming the directory. The directory
 * itself is left to the store's create, which takes the writer lock right after making it: made
 * here, it stood empty until then, and a `verify` or a loader opening it read NOT_A_CACHE, not a
 * cache being created. A path that is a regular file, or under one, is USAGE (cacheFileError),
 * checked first: no permission is wanting there.
 */
export async function ensureCacheDir(cacheDir: string): Promise<void> {
  await checkCacheDirNotFile(cacheDir, 'the cache directory');
  const missing: string[] = [];
  for (let current = resolve(cacheDir); ; current = dirname(current)) {
    const info = await stat(current).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw cacheDirError(cacheDir, error);
    });
    if (info) {
      if (!info.isDirectory()) throw cacheFileError(cacheDir, current, 'the cache directory', info.isFile());
      break;
    }
    missing.unshift(current);
    if (dirname(current) === current) break;
  }
  for (const path of missing.filter((path) => path !== resolve(cacheDir))) {
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

/**
 * USAGE where the cache directory `cacheDir` (named `label`: `--out` on the command line, `the
 * cache directory` for the library) is a regular file or lies under one: its nearest existing
 * ancestor-or-self is not a directory. It read `NOT_WRITABLE: cannot write the cache directory …:
 * … is not a directory`, a permission problem, where the path given is what is wrong. A symbolic
 * link to a missing target on the way is USAGE too (danglingLinkError): stat read it as not made
 * yet, and its creation failed with `IO_ERROR: … [ENOTDIR]`. So is a Hugging Face hub repository
 * directory that is no cache (checkNotHubRepo).
 */
export async function checkCacheDirNotFile(cacheDir: string, label: string): Promise<void> {
  await checkNotDanglingLink(cacheDir, label);
  await checkNotHubRepo(cacheDir, label);
  for (let current = resolve(cacheDir); ; current = dirname(current)) {
    // ENOTDIR: a parent of `current` is a file; the walk up finds it.
    const info = await stat(current).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' || error.code === 'ENOTDIR' ? null : undefined));
    // Anything else (EACCES, EIO) is left to the creation, which names it.
    if (info === undefined) return;
    if (info) {
      if (!info.isDirectory()) throw cacheFileError(cacheDir, current, label, info.isFile());
      return;
    }
    if (dirname(current) === current) return;
  }
}

/**
 * USAGE for a cache directory that is the file `file` (`details.reason` 'out-is-file') or lies under
 * it ('parent-is-file', `parentFile`): the path names no directory, and none can be made there.
 * `regular` false (a device such as /dev/null, a FIFO, a socket) says "is not a directory": it is no file.
 */
function cacheFileError(cacheDir: string, file: string, label: string, regular: boolean): BuilderError {
  if (file === resolve(cacheDir)) {
    return new BuilderError(
      'USAGE',
      `${label} ${cacheDir} ${regular ? 'is a file, not a directory' : 'is not a directory'}: give the cache's directory (an existing cache, or a path where a new one is created)`,
      { file: cacheDir, reason: 'out-is-file' },
    );
  }
  return new BuilderError(
    'USAGE',
    `${label} ${cacheDir} cannot be created: a parent of it, ${file}, ${regular ? 'is a file, not a directory' : 'is not a directory'}; give a path under a directory`,
    { file: cacheDir, reason: 'parent-is-file', parentFile: file },
  );
}
