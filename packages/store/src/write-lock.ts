import { createHash, randomBytes } from 'node:crypto';
import { constants, readFileSync, readlinkSync } from 'node:fs';
import { link, open, rename, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { StoreError, errnoCode, toIoError, toWriteError } from './errors.js';
import { lockTimeoutError } from './lock-timeout-error.js';
import { MAX_LOCK_BREAK_DEPTH, MAX_LOCK_FILE_BYTES, MAX_PID, TEMP_FILE_MAX_AGE_MS, UNPARSEABLE_LOCK_STALE_MS } from './limits.js';

/** What a lock file says about its holder. */
export interface LockHolder {
  pid: number;
  host: string;
  bootId: string | null;
  /** Process start time in clock ticks since boot (/proc/<pid>/stat field 22), to detect pid reuse. */
  startTicks: number | null;
  /**
   * The holder's pid namespace (Linux `/proc/self/ns/pid`, e.g. `pid:[4026531836]`; null where
   * unknown, and in records from before 2026-12-05): its pid means nothing in another namespace.
   */
  pidNamespace: string | null;
  token: string;
  createdMs: number;
}

export interface HeldLock {
  readonly path: string;
  readonly token: string;
  /** Lock files of dead holders removed while acquiring. */
  readonly recovered: string[];
  release(): Promise<void>;
}

let cachedBootId: string | null | undefined;
export function currentBootId(): string | null {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      cachedBootId = null;
    }
  }
  return cachedBootId;
}

/** A process's start time in clock ticks, or null where /proc is not available. */
export function readProcessStartTicks(pid: number): number | null {
  const ticks = Number(readProcessStatFields(pid)?.[19]);
  return Number.isSafeInteger(ticks) ? ticks : null;
}

/** Fields 3.. of /proc/<pid>/stat (state first), or null where there is no such file (not Linux, no such pid). */
function readProcessStatFields(pid: number): string[] | null {
  try {
    return statFieldsFromText(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** Fields 3.. of a /proc/<pid>/stat line: field 2 (comm) may contain spaces and parentheses, so they resume after the last ')'. */
function statFieldsFromText(text: string): string[] {
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/**
 * How a process that never releases its lock is held, from its /proc/<pid>/stat line: `stopped`
 * (state T: SIGSTOP, Ctrl-Z; `kill -CONT` resumes it), `traced` (state t: stopped by a debugger
 * or other tracer, which SIGCONT does not resume: only the tracer can continue it), or null (any
 * other state: running, sleeping, and so on).
 */
export type ProcessHeldState = 'stopped' | 'traced';

export function processHeldStateFromStat(statText: string): ProcessHeldState | null {
  const state = statFieldsFromText(statText)[0];
  return state === 'T' ? 'stopped' : state === 't' ? 'traced' : null;
}

/** `pid`'s held state (processHeldStateFromStat), or null where it runs or /proc cannot tell (not Linux, no such pid). */
export function readPidHeldState(pid: number): ProcessHeldState | null {
  try {
    return processHeldStateFromStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

let ownStartTicks: number | null | undefined;
export function describeThisProcess(): Omit<LockHolder, 'token' | 'createdMs'> {
  if (ownStartTicks === undefined) ownStartTicks = readProcessStartTicks(process.pid);
  return { pid: process.pid, host: hostname(), bootId: currentBootId(), startTicks: ownStartTicks, pidNamespace: currentPidNamespace() };
}

export function createToken(): string {
  return randomBytes(8).toString('hex');
}

function parseHolder(text: string | undefined): LockHolder | undefined {
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as Partial<LockHolder>;
    if (
      typeof v.pid === 'number' &&
      Number.isSafeInteger(v.pid) &&
      v.pid > 0 &&
      // No process has a larger pid; kill() cannot even be asked about one ≥ 2^31, so such a holder
      // could never be judged dead: unparseable instead (stale after UNPARSEABLE_LOCK_STALE_MS).
      v.pid <= MAX_PID &&
      typeof v.host === 'string' &&
      typeof v.token === 'string' &&
      /^[0-9a-f]{16}$/.test(v.token) &&
      typeof v.createdMs === 'number' &&
      // As readlink of /proc/self/ns/pid gives it: any other string (a flipped bit) would read as
      // another container's namespace, whose lock is never broken, so every writer timed out.
      (v.pidNamespace === undefined || v.pidNamespace === null || (typeof v.pidNamespace === 'string' && PID_NAMESPACE_PATTERN.test(v.pidNamespace)))
    ) {
      return {
        pid: v.pid,
        host: v.host,
        bootId: typeof v.bootId === 'string' ? v.bootId : null,
        startTicks: typeof v.startTicks === 'number' ? v.startTicks : null,
        pidNamespace: typeof v.pidNamespace === 'string' ? v.pidNamespace : null,
        token: v.token,
        createdMs: v.createdMs,
      };
    }
  } catch {
    // fall through: unparseable
  }
  return undefined;
}

/**
 * True when `pid` is certainly not running on this host: no such process (ESRCH; EPERM means it runs
 * as another user), or a zombie, killed and not yet reaped by its parent (state Z or X in
 * /proc/<pid>/stat). kill(pid, 0) succeeds for a zombie: a writer killed under a supervisor that
 * does not reap kept its lock (every writer LOCK_TIMEOUT) until the parent waited for it.
 */
export function isPidDead(pid: number): boolean {
  // Above the kernel's limit no process can have it (and kill() refuses a pid ≥ 2^31 outright).
  if (pid > MAX_PID) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return errnoCode(error) === 'ESRCH';
  }
  const state = readProcessStatFields(pid)?.[0];
  return state === 'Z' || state === 'X';
}

/**
 * True when `pid` is stopped (state T: SIGSTOP, Ctrl-Z) or traced (t: held by a debugger) in
 * /proc/<pid>/stat; false where it runs, or where /proc cannot tell (not Linux, no such pid).
 */
export function isPidStopped(pid: number): boolean {
  return readPidHeldState(pid) !== null;
}

let cachedPidSpaceTag: string | undefined;
let cachedPidNamespace: string | null | undefined;

/** The form of a pid namespace recorded in a lock (`pid:[<inode>]`). */
const PID_NAMESPACE_PATTERN = /^pid:\[\d{1,20}\]$/;

/**
 * This process's pid namespace (`/proc/self/ns/pid`'s link text), or null off Linux, and null for
 * a link text of another form: a record of it would be unparseable to every reader, this writer too.
 */
export function currentPidNamespace(): string | null {
  if (cachedPidNamespace === undefined) {
    try {
      const text = readlinkSync('/proc/self/ns/pid');
      cachedPidNamespace = PID_NAMESPACE_PATTERN.test(text) ? text : null;
    } catch {
      cachedPidNamespace = null;
    }
  }
  return cachedPidNamespace;
}

/**
 * 8 hex digits naming where this process's pid means something: its host name, boot and (Linux)
 * pid namespace. A file name carrying it says whose pid it holds (containers may share a host name
 * but not pids): only a pid of this tag can be judged dead here.
 */
export function pidSpaceTag(): string {
  if (cachedPidSpaceTag === undefined) {
    // Off Linux no namespace: the host name and boot say it.
    const namespace = currentPidNamespace() ?? '';
    cachedPidSpaceTag = createHash('sha1').update(`${hostname()}\n${currentBootId() ?? ''}\n${namespace}`).digest('hex').slice(0, 8);
  }
  return cachedPidSpaceTag;
}

/**
 * A temp file its writer left behind (killed mid-write): not this process's, and its writer is
 * known dead (`writerOnThisHost`: the pid is one of this host's), or it is older than
 * TEMP_FILE_MAX_AGE_MS whoever wrote it.
 */
export function isAbandonedTempFile(pid: number, mtimeMs: number, writerOnThisHost = true): boolean {
  if (pid === process.pid && writerOnThisHost) return false;
  return (writerOnThisHost && isPidDead(pid)) || Date.now() - mtimeMs > TEMP_FILE_MAX_AGE_MS;
}

/**
 * A holder is dead only when we can tell: same host and (another boot, or no such pid, or the pid now
 * belongs to a process that started at another time). A foreign host's lock is never judged dead.
 */
export function isHolderDead(holder: Pick<LockHolder, 'pid' | 'host' | 'bootId' | 'startTicks'> & { pidNamespace?: string | null }): boolean {
  if (holder.host !== hostname()) return false;
  const bootId = currentBootId();
  if (holder.bootId && bootId && holder.bootId !== bootId) return true;
  // Another pid namespace on this host and boot (containers sharing a host name, as with
  // --network=host, and the cache directory): its pid is not one of ours, so no answer here.
  // Before, such a live holder read as dead (no such pid here), its lock was broken, and two
  // writers appended at once. Judged as another host's: never broken automatically.
  if (isForeignPidNamespace(holder.pidNamespace)) return false;
  if (isPidDead(holder.pid)) return true;
  if (holder.startTicks !== null) {
    const ticks = readProcessStartTicks(holder.pid);
    if (ticks !== null && ticks !== holder.startTicks) return true;
  }
  return false;
}

/** A recorded pid namespace that is known and not this process's. */
export function isForeignPidNamespace(pidNamespace: string | null | undefined): boolean {
  const ours = currentPidNamespace();
  return typeof pidNamespace === 'string' && ours !== null && pidNamespace !== ours;
}

interface ObservedLock {
  /** Identity of this lock instance: its token, or the inode for an unparseable file. */
  id: string;
  holder: LockHolder | undefined;
  dead: boolean;
}

/**
 * O_NONBLOCK: a FIFO planted as a lock opens at once instead of hanging the thread (and every writer
 * behind it), then fails the regular-file check.
 */
const LOCK_READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

interface LockFileContent {
  /** The holder record's text; undefined when the file is above MAX_LOCK_FILE_BYTES (not ours: unparseable). */
  text: string | undefined;
  ino: number;
  mtimeMs: number;
  isFile: boolean;
}

/** Reads a lock file, at most MAX_LOCK_FILE_BYTES of it; undefined when it does not exist. */
async function readLockFile(path: string): Promise<LockFileContent | undefined> {
  try {
    // One handle for both, so the inode and the text belong to the same file.
    const handle = await open(path, LOCK_READ_FLAGS);
    try {
      const info = await handle.stat();
      if (!info.isFile()) return { text: undefined, ino: info.ino, mtimeMs: info.mtimeMs, isFile: false };
      const bytes = Buffer.alloc(MAX_LOCK_FILE_BYTES + 1);
      let done = 0;
      while (done < bytes.length) {
        const { bytesRead } = await handle.read(bytes, done, bytes.length - done, done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      const text = done > MAX_LOCK_FILE_BYTES ? undefined : bytes.toString('utf8', 0, done);
      return { text, ino: info.ino, mtimeMs: info.mtimeMs, isFile: true };
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return undefined;
    throw toIoError(error, 'cannot read the lock file', { path });
  }
}

/** Reads the lock at `path`; undefined when it does not exist. */
async function observeLock(path: string): Promise<ObservedLock | undefined> {
  const file = await readLockFile(path);
  if (!file) return undefined;
  const { text, ino, mtimeMs } = file;
  if (!file.isFile) {
    // Not something a writer made, and nothing says who holds it or whether they are alive.
    throw new StoreError('IO_ERROR', 'the lock file is not a regular file: its holder cannot be judged (remove it by hand)', {
      path,
      details: { reason: 'not-a-file' },
    });
  }
  const holder = parseHolder(text);
  if (holder) return { id: holder.token, holder, dead: abandonedTokens.has(holder.token) || isHolderDead(holder) };
  // Lock files are created complete (link of a written temp file); an unparseable one comes from a
  // power loss or tampering. Give a writer in the middle of something odd time before breaking it.
  return { id: `ino${ino}`, holder: undefined, dead: Date.now() - mtimeMs > UNPARSEABLE_LOCK_STALE_MS };
}

/**
 * Who holds the writer lock at `path`, by the store's own reading and judgement, for tools that
 * name a writer they wait on (the builder's CLI): the holder record and whether it is dead
 * (isHolderDead, or abandoned by this process). Undefined when there is no lock, or it cannot be
 * read or parsed (a lock being replaced, a planted FIFO, a damaged record). Never throws.
 */
export async function readWriteLockHolder(path: string): Promise<(LockHolder & { dead: boolean }) | undefined> {
  try {
    const observed = await observeLock(path);
    return observed?.holder === undefined ? undefined : { ...observed.holder, dead: observed.dead };
  } catch {
    return undefined;
  }
}

/** Creates `path` holding our holder record, atomically (link fails with EEXIST like O_EXCL). */
async function tryCreateLock(path: string, token: string): Promise<boolean> {
  const holder: LockHolder = { ...describeThisProcess(), token, createdMs: Date.now() };
  const temp = `${path}.tmp-${process.pid}-${token}.${pidSpaceTag()}`;
  try {
    await writeFile(temp, JSON.stringify(holder), { flag: 'wx' });
    await link(temp, path);
    return true;
  } catch (error) {
    if (errnoCode(error) === 'EEXIST') return false;
    throw toWriteError(error, 'cannot create the lock file', { path });
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

/**
 * Removes the dead marker instance `id` at the deepest break level, where no further marker
 * serializes recoverers. The file is moved aside first (rename is atomic), so only the instance that
 * was moved is judged: if a racing recoverer had already replaced the dead marker with its own live
 * one, that one is linked back (link never overwrites) and ours is dropped. What is left is a window
 * of microseconds in which the racer's marker is absent, needing a third recoverer of the same
 * four-crash chain to hit it; without this, such a chain made every writer fail until it was removed
 * by hand.
 */
async function reapDeadMarker(path: string, id: string, token: string): Promise<void> {
  const aside = `${path}.reap-${token}`;
  try {
    await rename(path, aside);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return;
    throw toWriteError(error, 'cannot move the stale lock-recovery marker aside', { path });
  }
  try {
    const moved = await observeLock(aside);
    if (moved && moved.id !== id) {
      await link(aside, path).catch((error) => {
        if (errnoCode(error) !== 'EEXIST') throw toWriteError(error, 'cannot restore a live lock-recovery marker', { path });
      });
    }
  } finally {
    await unlink(aside).catch((error) => {
      if (errnoCode(error) !== 'ENOENT') throw toWriteError(error, 'cannot remove the stale lock-recovery marker', { path: aside });
    });
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface AcquireLockOptions {
  timeoutMs: number;
  depth?: number | undefined;
  /** Ends the wait for a live holder (ABORTED, the signal's reason its cause): a CLI's Ctrl-C. */
  signal?: AbortSignal | undefined;
}

/**
 * Acquires the lock file at `path`. A dead holder's lock instance T is removed only by the holder of
 * `path.break-T` (acquired the same way, recursively), and only if `path` still carries T.
 */
export async function acquireLock(path: string, options: AcquireLockOptions): Promise<HeldLock> {
  const depth = options.depth ?? 0;
  const token = createToken();
  const recovered: string[] = [];
  const started = Date.now();
  let backoffMs = 1;
  for (;;) {
    if (await tryCreateLock(path, token)) {
      return {
        path,
        token,
        recovered,
        release: () => releaseLock(path, token),
      };
    }
    const observed = await observeLock(path);
    if (!observed) continue;
    if (observed.dead) {
      if (depth >= MAX_LOCK_BREAK_DEPTH) {
        // Each level here took one more crash during recovery; there is no deeper marker to queue on.
        await reapDeadMarker(path, observed.id, token);
        continue;
      }
      const breakPath = `${path}.break-${observed.id}`;
      const breaker = await acquireLock(breakPath, { timeoutMs: options.timeoutMs, depth: depth + 1, signal: options.signal });
      try {
        const again = await observeLock(path);
        if (again && again.id === observed.id) {
          await unlink(path).catch((error) => {
            if (errnoCode(error) !== 'ENOENT') throw toWriteError(error, 'cannot remove the stale lock', { path });
          });
          recovered.push(path, ...breaker.recovered);
        }
      } finally {
        await breaker.release();
      }
      continue;
    }
    const waitedMs = Date.now() - started;
    if (waitedMs > options.timeoutMs) {
      throw lockTimeoutError(path, observed.holder, { timeoutMs: options.timeoutMs, waitedMs, foreignNamespace: isForeignPidNamespace(observed.holder?.pidNamespace) });
    }
    // Only a wait is cut short: a lock taken is always released by its session.
    if (options.signal?.aborted) {
      throw new StoreError('ABORTED', `the wait for the writer lock held by pid ${observed.holder?.pid ?? '?'} on ${observed.holder?.host ?? '?'} was aborted`, {
        path,
        details: { holder: observed.holder, reason: options.signal.reason },
        cause: options.signal.reason,
      });
    }
    // Jittered backoff: commits hold the lock for milliseconds.
    await sleep(backoffMs * (0.5 + Math.random()));
    backoffMs = Math.min(50, backoffMs * 2);
  }
}

/**
 * Tokens of locks this process let go of but could not remove (an I/O error at release): it holds
 * them no more, so its own next writer session judges them dead and breaks them at once, instead
 * of waiting lockTimeoutMs behind its own live pid.
 */
const abandonedTokens = new Set<string>();

/** Attempts at removing the lock file before it is given up as abandoned (an I/O error may pass). */
const RELEASE_ATTEMPTS = 3;

/** Removes the lock if it is still ours (never someone else's). */
async function releaseLock(path: string, token: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const file = await readLockFile(path);
      if (!file || parseHolder(file.text)?.token !== token) return;
      await unlink(path);
      return;
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return;
      if (attempt < RELEASE_ATTEMPTS) {
        await sleep(10 * attempt);
        continue;
      }
      abandonedTokens.add(token);
      throw toWriteError(error, 'cannot release the lock', { path });
    }
  }
}

/** For gc: whether the lock (or break marker) file at `path` belongs to a dead holder. */
export async function isLockFileStale(path: string): Promise<boolean> {
  const observed = await observeLock(path);
  return observed?.dead ?? false;
}
