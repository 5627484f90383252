import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { parseS3Url, type S3Location } from '@splitzip/store';
import { BuilderError } from './errors.js';

/**
 * USAGE for a cache directory that is the model's directory or inside it (a directory of shards or
 * an index: the model's tree), or, for a single `.safetensors` file, the directory holding it. The
 * cache's files landed beside the shards, and `gc` then listed the shards as files the cache did not
 * write. Judged on real paths (symlinks resolved); a cache directory not made yet by its nearest
 * existing parent. Checked before the cache directory is made.
 */
export async function checkCacheOutsideModel(cacheDir: string, modelPath: string, model: SafetensorsModel): Promise<void> {
  const modelDir = await realpath(model.rootDir).catch(() => model.rootDir);
  const cacheReal = await resolveNearestReal(resolve(cacheDir));
  const rel = relative(modelDir, cacheReal);
  const isModelDir = rel === '';
  // A directory or an index: the model is the tree; a single file only shares its directory.
  const isTree = model.indexPath !== null || resolve(modelPath) === model.rootDir;
  // `..` itself or a `../` path leaves the model; a child named `..cache` does not.
  const leaves = rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel);
  const isInside = !isModelDir && isTree && !leaves;
  if (!isModelDir && !isInside) return;
  const where = isModelDir ? (isTree ? "is the model's directory" : "is the directory of the model's file") : "is inside the model's directory";
  const harm = isModelDir ? 'its files would land beside the shards' : "it would be part of the model's tree";
  throw new BuilderError(
    'USAGE',
    `the cache directory ${cacheDir}${cacheReal === cacheDir ? '' : ` (${cacheReal})`} ${where} ${modelDir}: ${harm}, and gc would list the model's files as files the cache did not write; choose a directory outside the model (a cache an older release built there moves as a whole: \`mv <cache> <outside>\`, then build with --out <outside>)`,
    { file: cacheDir, model: modelPath, modelDir },
  );
}

/** The real path of `path`, or of its nearest existing parent with the missing rest appended. */
async function resolveNearestReal(path: string): Promise<string> {
  const missing: string[] = [];
  for (let current = path; ; current = dirname(current)) {
    const real = await realpath(current).catch(() => undefined);
    if (real !== undefined) return missing.length === 0 ? real : join(real, ...missing.reverse());
    if (dirname(current) === current) return path;
    missing.push(basename(current));
  }
}

/**
 * USAGE for an `s3://` cache whose prefix holds the `s3://` model's, or lies inside it (same bucket,
 * either way round), as a local cache in the model's tree is refused: each prefix's objects would lie
 * among the other's (the cache's gc takes the model's shards for objects it did not write). Prefixes compare
 * by whole path parts (parseS3Url: '' or ending in '/'). Checked before anything is written.
 */
export function checkS3CacheOutsideModel(cacheUrl: string, modelUrl: string): void {
  let cache: S3Location;
  let model: S3Location;
  try {
    cache = parseS3Url(cacheUrl);
    model = parseS3Url(modelUrl);
  } catch {
    return; // a malformed URL is refused where it is opened, with its own reason
  }
  if (cache.bucket !== model.bucket) return;
  const where = cache.prefix === model.prefix ? "is the model's prefix" : cache.prefix.startsWith(model.prefix) ? "is inside the model's prefix" : model.prefix.startsWith(cache.prefix) ? "holds the model's prefix" : undefined;
  if (where === undefined) return;
  throw new BuilderError(
    'USAGE',
    `the cache ${cacheUrl} ${where} ${model.url}: the cache's objects would lie among the model's, or the model's among the cache's (which gc takes for objects the cache did not write); choose a prefix outside the model's (and the model outside the cache's)`,
    { file: cacheUrl, model: modelUrl },
  );
}
