import { realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { BuilderError } from './errors.js';
import { HUB_REPO_NAME } from './hub-repo-name.js';

/** What marks a local cache: a directory holding it is left to the store's own checks. */
const CACHE_MANIFEST_NAME = 'manifest.json';
/**
 * How many directories above `--out` are looked at for a hub repository: its snapshots/<rev>/ and a
 * pipeline's component directories in it (unet/, vae/) lie 2 to 4 levels below the repository; 8
 * leaves room for deeper trees while the walk stays a handful of stats.
 */
const MAX_PARENT_LEVELS = 8;

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

async function holdsRefsAndSnapshots(dir: string): Promise<boolean> {
  return (await isDirectory(join(dir, 'refs'))) && (await isDirectory(join(dir, 'snapshots')));
}

/**
 * The hub repository directory (named `models--…`, holding refs/ and snapshots/) that `out` lies
 * inside, at most MAX_PARENT_LEVELS up; undefined where there is none. Walks the real path of the
 * nearest existing ancestor-or-self: an `--out` that is (or lies under) a link into a repository is
 * inside it too.
 */
async function findEnclosingHubRepo(out: string): Promise<string | undefined> {
  let current = out;
  let real: string | undefined;
  let levels = 0;
  for (; levels < MAX_PARENT_LEVELS; levels++) {
    real = await realpath(current).catch(() => undefined);
    if (real !== undefined || dirname(current) === current) break;
    current = dirname(current);
  }
  if (real === undefined) return undefined;
  // `--out` itself is judged by checkNotHubRepo; a missing tail's nearest existing parent is a candidate.
  let candidate = current === out ? dirname(real) : real;
  for (; levels < MAX_PARENT_LEVELS; levels++) {
    if (HUB_REPO_NAME.test(basename(candidate)) && (await holdsRefsAndSnapshots(candidate))) return candidate;
    if (dirname(candidate) === candidate) return undefined;
    candidate = dirname(candidate);
  }
  return undefined;
}

/**
 * USAGE where the cache directory `cacheDir` (named `label`) is no cache and is a Hugging Face hub
 * repository (`models--org--name`: it holds refs/ and snapshots/; `details.reason` 'out-is-hub-repo')
 * or lies anywhere inside one (snapshots/<rev>, blobs/, refs/, deeper; 'out-in-hub-repo', `hubRepo`):
 * a build there wrote the cache's files among the hub's (into a snapshot, or its payloads into
 * blobs/), where the hub's own tools (`huggingface-cli delete-cache`, scan-cache) count or remove them.
 */
export async function checkNotHubRepo(cacheDir: string, label: string): Promise<void> {
  const out = resolve(cacheDir);
  const isCache = await stat(join(out, CACHE_MANIFEST_NAME)).then(
    () => true,
    () => false,
  );
  if (isCache) return;
  if (await holdsRefsAndSnapshots(out)) {
    throw new BuilderError(
      'USAGE',
      `${label} ${cacheDir} is a Hugging Face hub repository (it holds refs/ and snapshots/): the cache's files would land among the hub's, its payloads in the hub's blobs/; give a directory of its own (outside the hub cache)`,
      { file: cacheDir, reason: 'out-is-hub-repo' },
    );
  }
  const repo = await findEnclosingHubRepo(out);
  if (repo === undefined) return;
  throw new BuilderError(
    'USAGE',
    `${label} ${cacheDir} lies inside the Hugging Face hub repository ${repo} (it holds refs/ and snapshots/): the cache's files would land among the hub's; give a directory of its own (outside the hub cache)`,
    { file: cacheDir, reason: 'out-in-hub-repo', hubRepo: repo },
  );
}
