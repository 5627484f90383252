// A directory cache between its creator's mkdir and its first manifest (a build's first run): the
// creator takes the writer lock, writes journal.1 and manifest.json, and lets the lock go. A reader
// opening it meanwhile found no manifest and was told to create the cache, which that writer is doing.
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { StoreError } from './errors.js';
import { formatAge } from './format-age.js';
import { isForeignPidNamespace, readPidHeldState, readWriteLockHolder } from './write-lock.js';

/**
 * `error` as it is, unless it is the missing-manifest NOT_A_CACHE of a cache whose lock file at
 * `lockPath` names a live holder (not judged dead: this host's running or stopped process, or
 * another host's or pid namespace's, which cannot be judged): then NOT_A_CACHE with
 * `details.reason` 'being-created', `details.holder`, `details.holderStopped` (stopped or traced:
 * it never writes the manifest) and `details.holderTraced` (held by a debugger), saying who is
 * creating it. Without a lock, or with a dead holder's, NOT_A_CACHE as it was. Never throws.
 */
export async function markCacheBeingCreated(error: unknown, lockPath: string): Promise<unknown> {
  // Only the missing manifest beside this lock (not a cache path that is a file, whose path is the root).
  if (!(error instanceof StoreError) || error.code !== 'NOT_A_CACHE' || error.path !== join(dirname(lockPath), 'manifest.json')) return error;
  const found = await readWriteLockHolder(lockPath);
  if (found === undefined || found.dead) return error;
  const { dead: _dead, ...holder } = found;
  const here = holder.host === hostname();
  // Another pid namespace's pid names some other process here, if any.
  const held = here && !isForeignPidNamespace(holder.pidNamespace) ? readPidHeldState(holder.pid) : null;
  // A traced holder is stopped too (it never writes the manifest) but SIGCONT does not resume it.
  const stopped = held !== null;
  const traced = held === 'traced';
  // Another host's clock may be off: how long only for this host's holder.
  const heldFor = here ? `has held its writer lock for ${formatAge(Math.max(0, Date.now() - holder.createdMs))}` : 'holds its writer lock';
  const next = traced
    ? 'that process is held by a debugger (traced): continue it in the debugger, or end it, then open the cache again'
    : stopped
      ? `that process is stopped (job control or SIGSTOP): resume it with \`kill -CONT ${holder.pid}\` or end it, then open the cache again`
      : 'open the cache again once it has written manifest.json';
  return new StoreError(
    'NOT_A_CACHE',
    `no manifest.json yet: the cache is being created by pid ${holder.pid} on ${holder.host}${here ? ' (this host)' : ''}, which ${heldFor}; ${next}`,
    { path: error.path, details: { ...error.details, reason: 'being-created', holder, holderStopped: stopped, holderTraced: traced, lockPath }, cause: error },
  );
}
