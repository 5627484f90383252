import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { BuilderError } from './errors.js';

/** What marks a local cache: a directory holding it is left to the store's own checks. */
const CACHE_MANIFEST_NAME = 'manifest.json';

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

/**
 * USAGE (`details.reason` 'out-is-hub-repo') where the cache directory `cacheDir` (named `label`) is a
 * Hugging Face hub repository (`models--org--name`: it holds refs/ and snapshots/) and no cache:
 * a build there wrote the cache's files among the hub's, its payloads into the hub's blobs/, where
 * the hub's own tools (`huggingface-cli delete-cache`, scan-cache) would count or remove them.
 */
export async function checkNotHubRepo(cacheDir: string, label: string): Promise<void> {
  if (!(await isDirectory(join(cacheDir, 'refs'))) || !(await isDirectory(join(cacheDir, 'snapshots')))) return;
  const isCache = await stat(join(cacheDir, CACHE_MANIFEST_NAME)).then(
    () => true,
    () => false,
  );
  if (isCache) return;
  throw new BuilderError(
    'USAGE',
    `${label} ${cacheDir} is a Hugging Face hub repository (it holds refs/ and snapshots/): the cache's files would land among the hub's, its payloads in the hub's blobs/; give a directory of its own (outside the hub cache)`,
    { file: cacheDir, reason: 'out-is-hub-repo' },
  );
}
