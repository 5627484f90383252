// A directory cache between its creator's mkdir and its first manifest (a build's first run): the
// creator makes the directory, takes the writer lock (a temp file holding its record, then linked
// as `lock`), makes blobs/, writes journal.1 and manifest.json, and lets the lock go. A reader
// opening it meanwhile found no manifest and was told to create the cache, which that writer is
// doing; before the lock was linked (the directory empty, or holding only the lock's temp file)
// it still was.
import { lstat, readdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { StoreError } from './errors.js';
import { formatAge } from './format-age.js';
import { EMPTY_CACHE_DIR_LOOK_AGAIN_MS, LOCK_TEMP_MIN_AGE_MS } from './limits.js';
import { currentBootId, currentPidNamespace, isForeignPidNamespace, isPidDead, pidSpaceTag, readPidHeldState, readProcessStartTicks, readWriteLockHolder, type LockHolder } from './write-lock.js';

/** Waits `ms` (the pause before an empty directory is looked at again); a parameter for tests. */
export type LookAgainPause = (ms: number) => Promise<void>;

const sleep: LookAgainPause = (ms) => new Promise((done) => setTimeout(done, ms));

/**
 * `error` as it is, unless it is the missing-manifest NOT_A_CACHE of a cache whose lock file at
 * `lockPath` names a live holder (not judged dead: this host's running or stopped process, or
 * another host's or pid namespace's, which cannot be judged), or, with no lock yet, whose lock
 * attempt's temp file (`lock.tmp-<pid>-…`) is a live process's of this pid space: then NOT_A_CACHE
 * with `details.reason` 'being-created', `details.holder`, `details.holderStopped` (stopped or
 * traced: it never writes the manifest), `details.holderTraced` (held by a debugger) and
 * `details.lockTaken` (false: still taking the lock), saying who is creating it. A directory with
 * nothing in it is looked at once more after EMPTY_CACHE_DIR_LOOK_AGAIN_MS (its creator's lock
 * attempt comes right after its mkdir). Without a creator, or with a dead one, NOT_A_CACHE as it
 * was. Never throws.
 */
export async function markCacheBeingCreated(error: unknown, lockPath: string, pause: LookAgainPause = sleep): Promise<unknown> {
  // Only the missing manifest beside this lock (not a cache path that is a file, whose path is the root).
  if (!(error instanceof StoreError) || error.code !== 'NOT_A_CACHE' || error.path !== join(dirname(lockPath), 'manifest.json')) return error;
  let found = await findCreator(lockPath);
  if (found === undefined && (await isEmptyDirectory(dirname(lockPath)))) {
    await pause(EMPTY_CACHE_DIR_LOOK_AGAIN_MS);
    found = await findCreator(lockPath);
  }
  if (found === undefined) return error;
  const { holder, lockTaken } = found;
  const here = holder.host === hostname();
  // Another pid namespace's pid names some other process here, if any.
  const held = here && !isForeignPidNamespace(holder.pidNamespace) ? readPidHeldState(holder.pid) : null;
  // A traced holder is stopped too (it never writes the manifest) but SIGCONT does not resume it.
  const stopped = held !== null;
  const traced = held === 'traced';
  // Another host's clock may be off: how long only for this host's holder.
  const heldFor = !lockTaken
    ? 'is taking its writer lock'
    : here
      ? `has held its writer lock for ${formatAge(Math.max(0, Date.now() - holder.createdMs))}`
      : 'holds its writer lock';
  const next = traced
    ? 'that process is held by a debugger (traced): continue it in the debugger, or end it, then open the cache again'
    : stopped
      ? `that process is stopped (job control or SIGSTOP): resume it with \`kill -CONT ${holder.pid}\` or end it, then open the cache again`
      : 'open the cache again once it has written manifest.json';
  return new StoreError(
    'NOT_A_CACHE',
    `no manifest.json yet: the cache is being created by pid ${holder.pid} on ${holder.host}${here ? ' (this host)' : ''}, which ${heldFor}; ${next}`,
    { path: error.path, details: { ...error.details, reason: 'being-created', holder, holderStopped: stopped, holderTraced: traced, lockTaken, lockPath }, cause: error },
  );
}

/** The live creator the lock, or else a lock attempt's temp file, names; undefined when none. */
async function findCreator(lockPath: string): Promise<{ holder: LockHolder; lockTaken: boolean } | undefined> {
  const found = await readWriteLockHolder(lockPath);
  if (found !== undefined) {
    if (found.dead) return undefined;
    const { dead: _dead, ...holder } = found;
    return { holder, lockTaken: true };
  }
  const attempt = await findLiveLockAttempt(lockPath);
  return attempt === undefined ? undefined : { holder: attempt, lockTaken: false };
}

/**
 * The record of a live process's lock attempt at `lockPath` (its temp file, written and then linked
 * as the lock; tryCreateLock), or undefined. Only a name of this pid space is judged (another's pid
 * means nothing here); a temp file not yet written (opened, empty) is described from its name while
 * it is younger than LOCK_TEMP_MIN_AGE_MS: it is written at once, so an older one is a killed
 * attempt's, and its pid, reused by another process, kept readers saying "being created" for good.
 */
async function findLiveLockAttempt(lockPath: string): Promise<LockHolder | undefined> {
  const dir = dirname(lockPath);
  const prefix = `${basename(lockPath)}.tmp-`;
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const attempt = name.startsWith(prefix) ? parseLockAttemptName(name.slice(prefix.length)) : undefined;
    if (attempt === undefined || attempt.tag !== pidSpaceTag()) continue;
    const { pid, token } = attempt;
    if (isPidDead(pid)) continue;
    const path = join(dir, name);
    // Looked at before it is read (the read follows a link): linked as the lock and removed
    // meanwhile, the caller's retry looks at the lock again; a directory, FIFO or link of such a
    // name is no attempt (writeFile 'wx' makes a regular file).
    const info = await lstat(path).catch(() => undefined);
    if (info === undefined || !info.isFile()) continue;
    const written = await readWriteLockHolder(path);
    if (written !== undefined) {
      if (written.dead || written.pid !== pid) continue;
      const { dead: _dead, ...holder } = written;
      return holder;
    }
    // Either way off: a file stamped in the future would otherwise count for as long.
    if (Math.abs(Date.now() - info.mtimeMs) >= LOCK_TEMP_MIN_AGE_MS) continue;
    return { pid, host: hostname(), bootId: currentBootId(), startTicks: readProcessStartTicks(pid), pidNamespace: currentPidNamespace(), token, createdMs: info.mtimeMs };
  }
  return undefined;
}

/**
 * `<pid>-<token>.<pid space tag>`, the rest of a lock attempt's name (tryCreateLock), or undefined:
 * the pid decimal from 1 with no leading zero. A pid 0 passed the liveness check (kill(0, 0)
 * signals this process's group), and `0123` or a name found further in (an unanchored pattern) is
 * no name the store writes.
 */
function parseLockAttemptName(rest: string): { pid: number; token: string; tag: string } | undefined {
  const match = /^([1-9][0-9]*)-([0-9a-f]{16})\.([0-9a-f]{8})$/.exec(rest);
  if (match === null) return undefined;
  const [, pidText = '', token = '', tag = ''] = match;
  const pid = Number(pidText);
  return Number.isSafeInteger(pid) ? { pid, token, tag } : undefined;
}

/** Whether `dir` is a directory with no entries (not one that cannot be read). */
async function isEmptyDirectory(dir: string): Promise<boolean> {
  const names = await readdir(dir).catch(() => undefined);
  return names !== undefined && names.length === 0;
}
