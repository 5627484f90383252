import { lstat, readlink, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { BuilderError } from './errors.js';

/** A symbolic link whose target does not exist: `link` as resolved, `target` as the link holds it. */
export interface DanglingLink {
  link: string;
  target: string;
}

/**
 * The symbolic link to a missing target that `path` is, or that lies on its way (`link/cache`);
 * undefined where there is none. stat reads such a link as absent (ENOENT), so the path looked not
 * made yet, and its creation then failed with ENOTDIR/EEXIST: a link to a cache on a disk not mounted.
 */
export async function findDanglingLink(path: string): Promise<DanglingLink | undefined> {
  for (let current = resolve(path); ; current = dirname(current)) {
    const failure = await stat(current).then(
      () => undefined,
      (error: NodeJS.ErrnoException) => error.code,
    );
    // It exists (nothing under it is a link yet), or it cannot be told (left to the caller's own checks).
    if (failure !== 'ENOENT') return undefined;
    const info = await lstat(current).catch(() => undefined);
    if (info?.isSymbolicLink()) {
      const target = await readlink(current).catch(() => undefined);
      return target === undefined ? undefined : { link: current, target };
    }
    if (dirname(current) === current) return undefined;
  }
}

/**
 * USAGE for the cache path `cacheDir` (named `label`: `option '--out'`, `the cache`) that is the
 * dangling link `found` (`details.reason` 'out-is-dangling-link') or lies under one
 * ('parent-is-dangling-link', `parentLink`); `linkTarget` is what the link holds.
 */
export function danglingLinkError(cacheDir: string, found: DanglingLink, label: string): BuilderError {
  const where = resolve(dirname(found.link), found.target);
  const target = where === found.target ? where : `${found.target} (${where})`;
  const fix = `which does not exist (a disk not mounted, or a directory moved or removed): mount or create ${where}, or give another path`;
  if (found.link === resolve(cacheDir)) {
    return new BuilderError(
      'USAGE',
      `${label} ${cacheDir} is a symbolic link to ${target}, ${fix}`,
      { file: cacheDir, reason: 'out-is-dangling-link', linkTarget: found.target },
    );
  }
  return new BuilderError(
    'USAGE',
    `${label} ${cacheDir} cannot be reached: a parent of it, ${found.link}, is a symbolic link to ${target}, ${fix}`,
    { file: cacheDir, reason: 'parent-is-dangling-link', parentLink: found.link, linkTarget: found.target },
  );
}

/** Throws danglingLinkError where `cacheDir` is, or lies under, a symbolic link to a missing target. */
export async function checkNotDanglingLink(cacheDir: string, label: string): Promise<void> {
  const found = await findDanglingLink(cacheDir);
  if (found !== undefined) throw danglingLinkError(cacheDir, found, label);
}
