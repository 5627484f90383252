import { lstat, readdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { isS3Url, isStoreError, openCacheStore, StoreError, type CacheStore, type LockHolder } from '@splitzip/store';
import { BuilderError } from './errors.js';
import { describeHolder } from './read-lock-holder.js';

/**
 * Opens a cache that must exist (verify, inspect, gc). A directory with no manifest.json yet whose
 * lock file names a writer that is not dead is a cache being created (a build between taking the
 * lock and writing its first manifest, or stopped there; the store's NOT_A_CACHE with
 * `details.reason` 'being-created'): CACHE_BEING_CREATED naming that writer, where NOT_A_CACHE
 * said to run a build, which the writer is; a stopped one (`holderStopped`) is said to be stopped,
 * with `kill -CONT`, since it never finishes on its own; a traced one (`holderTraced`: held by a
 * debugger, which SIGCONT does not resume) is said to be held by a debugger.
 */
export async function openExistingCache(cache: string, options: { signal: AbortSignal; command: string }): Promise<CacheStore> {
  try {
    // The signal ends a directory cache's waits for the writer lock, an s3:// cache's requests (Ctrl-C).
    // One binding per file (FILE-BINDINGS.md), as build and the runtime: gc, verify and inspect write
    // only by unbinding and dropping, but a rebind through this handle must keep the rule (s3://: no effect).
    return await openCacheStore(cache, { create: false, signal: options.signal, s3: { signal: options.signal }, sliceBindingsPerFile: true });
  } catch (error) {
    if (!isStoreError(error, 'NOT_A_CACHE') || isS3Url(cache)) throw error;
    const holder = error.details.reason === 'being-created' ? (error.details.holder as LockHolder | undefined) : undefined;
    if (holder === undefined) {
      throw (await markParentFile(error, cache)) ?? (await markInterruptedFirstBuild(error, cache)) ?? (await markModelDirectory(error, cache, options.command));
    }
    const stopped = error.details.holderStopped === true;
    const traced = stopped && error.details.holderTraced === true;
    const creating = `a cache is being created at ${cache} by ${describeHolder(holder)}`;
    const message = traced
      ? `${creating}, which is held by a debugger (traced) holding the cache's writer lock before writing manifest.json: continue it in the debugger, or end it, then run ${options.command} again`
      : stopped
        ? `${creating}, which is stopped (job control or SIGSTOP) holding the cache's writer lock before writing manifest.json: resume it with \`kill -CONT ${holder.pid}\` or end it, then run ${options.command} again`
        : `${creating}: it ${error.details.lockTaken === false ? 'is taking' : 'holds'} the cache's writer lock and has not written manifest.json yet (a build starting); run ${options.command} again once it has`;
    throw new BuilderError('CACHE_BEING_CREATED', message, { file: cache, holder, holderStopped: stopped, holderTraced: traced }, { cause: error });
  }
}

/**
 * NOT_A_CACHE for a path under a regular file (`afile/sub`, ENOTDIR): the same code, with
 * `details.reason` 'parent-is-file' and `details.parentFile` naming that file, where the line said
 * the path itself was a file (it does not exist). Undefined for any other path.
 */
async function markParentFile(error: StoreError, cache: string): Promise<StoreError | undefined> {
  const failure = await lstat(cache).then(
    () => undefined,
    (e: unknown) => (e as { code?: unknown }).code,
  );
  if (failure !== 'ENOTDIR') return undefined;
  // The nearest ancestor that exists is the file in the way.
  for (let dir = dirname(resolve(cache)); dir !== dirname(dir); dir = dirname(dir)) {
    const stats = await stat(dir).catch(() => undefined);
    if (stats === undefined) continue;
    if (stats.isDirectory()) return undefined;
    return new StoreError('NOT_A_CACHE', `${cache} does not exist: its parent ${dir} is a file, not a directory`, {
      ...(error.path === undefined ? {} : { path: error.path }),
      details: { ...error.details, reason: 'parent-is-file', parentFile: dir },
      cause: error,
    });
  }
  return undefined;
}

/**
 * NOT_A_CACHE for a directory that holds a model (`*.safetensors`, an index) and no manifest: the
 * same code, with `details.reason` 'model-directory' and the command, so that the line says it
 * looks like a model and names `splitzip verify <cache> --model <dir>` (it said to build a cache
 * into it, which would put the cache's files beside the shards). Any other NOT_A_CACHE as it is.
 */
async function markModelDirectory(error: StoreError, cache: string, command: string): Promise<StoreError> {
  const names = await readdir(cache).catch(() => [] as string[]);
  const modelFiles = names.filter((name) => name.endsWith('.safetensors') || name.endsWith('.index.json')).sort();
  if (modelFiles.length === 0) return error;
  return new StoreError('NOT_A_CACHE', `${cache} holds a model (${modelFiles.slice(0, 3).join(', ')}${modelFiles.length > 3 ? ', …' : ''}) and no manifest.json`, {
    ...(error.path === undefined ? {} : { path: error.path }),
    details: { ...error.details, reason: 'model-directory', command, modelDir: cache, modelFiles },
    cause: error,
  });
}

/**
 * What a first build leaves in a cache directory before its first manifest (creation order: the
 * directory, the lock, blobs/; then temp files of the manifest and journal, renamed at the commit).
 * A build killed there left a directory verify called "not a SplitZip cache (no manifest.json)",
 * as for any empty directory: the user could not tell an interrupted build from a wrong path.
 */
const FIRST_BUILD_LEFTOVER = /^(lock|lock\.tmp-.+|blobs|\.tmp-.+|journal\.\d+(\..+)?)$/;

/**
 * NOT_A_CACHE for a directory holding only a first build's leftovers (no live writer: a live one is
 * CACHE_BEING_CREATED above): the same code, with `details.reason` 'interrupted-first-build' and
 * `details.leftovers` (their names, sorted), so the line says a build stopped before its first
 * commit and that re-running it starts over (the next writer removes a dead writer's lock and temp
 * files). Undefined for any other directory (empty, a model's, anything else in it).
 */
async function markInterruptedFirstBuild(error: StoreError, cache: string): Promise<StoreError | undefined> {
  const names = await readdir(cache).catch(() => [] as string[]);
  if (names.length === 0 || !names.every((name) => FIRST_BUILD_LEFTOVER.test(name))) return undefined;
  const leftovers = [...names].sort();
  return new StoreError('NOT_A_CACHE', `${cache} holds only what a first build leaves before its first commit (${leftovers.join(', ')}) and no manifest.json`, {
    ...(error.path === undefined ? {} : { path: error.path }),
    details: { ...error.details, reason: 'interrupted-first-build', leftovers },
    cause: error,
  });
}
