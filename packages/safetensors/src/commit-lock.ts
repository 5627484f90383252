import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, join } from 'node:path';
import { currentPidNamespace, judgeCommitHolder, markCommitSettled, newWriterId, parseCommitHolder, type CommitHolder } from './commit-record.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

/** A lock's text is a few hundred bytes; a larger file there is none of ours. */
const MAX_LOCK_BYTES = 4096;
/** Tries to take a lock that changes hands meanwhile (released, broken by another), before giving up. */
const LOCK_ATTEMPTS = 4;
/** A live breaker holds the break sub-lock for a few file operations: waited for this often, this long. */
const BREAK_WAIT_ATTEMPTS = 200;
const BREAK_WAIT_MS = 10;

/** `.<indexFileName>.commit.lock`: held by a writer's commit and by resumeShardedModelWrite, one at a time. */
export function commitLockNameFor(indexFileName: string): string {
  return `.${indexFileName}.commit.lock`;
}

/**
 * Leftovers of the lock a commit of this index no longer needs (a resume removes them under the
 * lock): `.<index>.commit.lock.stale-<pid>-<12 hex>` (a break sub-lock moved aside),
 * `.<index>.commit.lock.tmp-<pid>-<12 hex>`, `.<index>.commit.lock.break.tmp-<pid>-<12 hex>` (a
 * lock's text before its link, of a process killed there), and the break sub-lock
 * `.<index>.commit.lock.break` itself (under the lock no break is needed, and a breaker removes only
 * the text it judged dead, never a lock taken since).
 */
export function isStaleLockName(name: string, indexFileName: string): boolean {
  const lock = commitLockNameFor(indexFileName);
  if (name === `${lock}.break`) return true;
  for (const kind of ['.stale-', '.tmp-', '.break.tmp-']) {
    const prefix = `${lock}${kind}`;
    if (name.startsWith(prefix) && /^\d{1,10}-[0-9a-f]{12}$/.test(name.slice(prefix.length))) return true;
  }
  return false;
}

export interface CommitLock {
  /** Removes the lock where it still holds this holder's text (read just before); never throws. Whether it is gone. */
  release(): Promise<boolean>;
}

/**
 * Test seam: called before each file operation on a lock (`create <name>`, `read <name>`,
 * `remove <name>`, `aside <name>`), where a test holds one taker while others run.
 */
let lockStepObserver: ((step: string) => Promise<void> | void) | undefined;
export function setCommitLockStepObserver(observer: ((step: string) => Promise<void> | void) | undefined): void {
  lockStepObserver = observer;
}

/**
 * Takes the commit lock of `indexFileName` in `root` before a commit or a resume removes anything:
 * two of them at once removed each other's new files. The lock is created atomically with its text
 * (this process's pid, host, pid namespace and `holderId`, unique to the taker): written to a temp,
 * fsynced, then link()ed to the lock name (EEXIST: held), so no lock is ever empty or cut short. A
 * lock held by another holder is COMMIT_IN_PROGRESS unless judgeCommitHolder finds it dead (its pid
 * gone on this host and pid namespace; in this process, settled) or `breakAny` (the caller's
 * writerStopped); then it is broken under the break sub-lock (breakLock) and taken. A lock that
 * cannot be read as a holder, or of another host or pid namespace, is broken only with `breakAny`.
 */
export async function acquireCommitLock(root: string, indexFileName: string, holderId: string, breakAny: boolean): Promise<CommitLock> {
  const path = join(root, commitLockNameFor(indexFileName));
  const text = holderText(holderId);
  for (let attempt = 0; attempt < LOCK_ATTEMPTS; attempt += 1) {
    if (await createLockFile(path, text)) {
      await removeLockTemps(root, indexFileName);
      return lockAt(path, text);
    }
    const found = await readLock(path);
    if (found === undefined) continue; // released meanwhile
    // Its own lock, left by a release that failed: taken over.
    if (found.holder?.writerId === holderId) return lockAt(path, found.text);
    const state = found.holder === undefined ? 'unreadable' : judgeCommitHolder(found.holder);
    if (state !== 'dead' && !breakAny) throw lockHeld(root, path, found.holder, state);
    await breakLock(path, found.text, breakAny);
  }
  throw new SafetensorsError('COMMIT_IN_PROGRESS', `the commit lock ${quoteValue(path)} changed hands ${LOCK_ATTEMPTS} times while being taken: another writer or resume of this directory runs; try again once it finished`, { file: path });
}

/**
 * COMMIT_IN_PROGRESS where the commit lock of `indexFileName` is held by a holder that is not dead,
 * or is dead while its break sub-lock is held by one that is not (a writer checks this when it is
 * created: a held lock was found only at close(), after the whole model was written). A dead
 * holder's lock is left for the commit to break.
 */
export async function checkCommitLockFree(root: string, indexFileName: string): Promise<void> {
  const path = join(root, commitLockNameFor(indexFileName));
  let found;
  try {
    found = await readLock(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOTDIR') return;
    throw error;
  }
  if (found === undefined) return;
  const state = found.holder === undefined ? 'unreadable' : judgeCommitHolder(found.holder);
  if (state !== 'dead') throw lockHeld(root, path, found.holder, state);
  // The commit would have to break it: a break sub-lock it cannot move aside stops that at close().
  const sub = await readLock(`${path}.break`);
  if (sub === undefined) return;
  const subState = sub.holder === undefined ? 'unreadable' : judgeCommitHolder(sub.holder);
  if (subState !== 'dead') throw lockHeld(root, `${path}.break`, sub.holder, subState);
}

/**
 * Removes the lock's temps (`<lock>.tmp-*`, `<lock>.break.tmp-*`, of any pid) of takers killed
 * before removing theirs, and the break sub-lock (`<lock>.break`: one left by a breaker killed after
 * its unlink of the dead lock, of another pid namespace, or of a live breaker about to release it);
 * best effort. A live taker's temp removed meanwhile makes its link fail (ENOENT), read as held: it
 * is, by this taker. A live breaker whose sub-lock is removed finds the lock taken anew (not the text
 * it judged dead) and leaves it.
 */
async function removeLockTemps(root: string, indexFileName: string): Promise<void> {
  const lock = commitLockNameFor(indexFileName);
  const names = await readdir(root).catch(() => [] as string[]);
  for (const name of names) {
    if (isStaleLockName(name, indexFileName) && !name.startsWith(`${lock}.stale-`)) await unlink(join(root, name)).catch(() => undefined);
  }
}

function holderText(writerId: string): string {
  const holder: CommitHolder = { pid: process.pid, host: hostname(), pidNamespace: currentPidNamespace(), writerId };
  return JSON.stringify(holder);
}

/** Creates `path` holding `text`, all or nothing: temp, write, fsync, link (no replace). false: it exists. */
async function createLockFile(path: string, text: string): Promise<boolean> {
  const temp = `${path}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
  let handle: FileHandle | undefined;
  try {
    handle = await open(temp, 'wx');
    await handle.writeFile(text);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await lockStepObserver?.(`create ${basename(path)}`);
    try {
      await link(temp, path);
    } catch (error) {
      // ENOENT: a resume holding the lock removed this temp as a killed taker's (the lock is held).
      const code = (error as NodeJS.ErrnoException)?.code;
      if (code === 'EEXIST' || code === 'ENOENT') return false;
      throw error;
    }
    // No directory fsync: the lock orders live processes only. After a crash none runs, and a lock
    // name lost is a released lock; its text is fsynced before the link, so a name that survives
    // never lacks it.
    return true;
  } catch (error) {
    return rethrowIo(error, path);
  } finally {
    await handle?.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
  }
}

function lockAt(path: string, text: string): CommitLock {
  return { release: () => removeLockIfText(path, text) };
}

/**
 * Removes the lock at `path` where its text is still `text` (read just before the unlink). Only
 * the holder named in it, or a breaker holding the break sub-lock, calls this: under the
 * documented rules nobody else removes or replaces it between the read and the unlink. Never
 * throws; true where the lock is gone (removed, or not there).
 */
async function removeLockIfText(path: string, text: string): Promise<boolean> {
  try {
    const now = await readLock(path);
    if (now === undefined) return true;
    if (now.text !== text) return false;
    await lockStepObserver?.(`remove ${basename(path)}`);
    await unlink(path);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException)?.code === 'ENOENT';
  }
}

function lockHeld(root: string, path: string, holder: CommitHolder | undefined, state: 'alive' | 'unseen' | 'unreadable'): SafetensorsError {
  const who =
    state === 'unreadable'
      ? 'a holder it does not name (a file of something else, or of an older version of this package)'
      : state === 'unseen'
        ? `pid ${holder?.pid} of host ${quoteValue(holder?.host)}${holder?.pidNamespace === null ? '' : ` in pid namespace ${holder?.pidNamespace}`}, a process this one cannot see`
        : `pid ${holder?.pid}, alive on this host`;
  const what = path.endsWith('.break') ? 'break lock' : 'commit lock';
  return new SafetensorsError(
    'COMMIT_IN_PROGRESS',
    `the ${what} ${quoteValue(path)} is held by ${who}: a writer or resume of this directory may be committing now; once none runs, resumeShardedModelWrite(${quoteValue(root)}, { writerStopped: true }) breaks it (where a commit record is there; else remove the lock file)`,
    { file: path },
  );
}

/** The lock's holder (undefined: unreadable) and text; undefined where the lock is gone. */
async function readLock(path: string): Promise<{ holder: CommitHolder | undefined; text: string } | undefined> {
  let handle: FileHandle | undefined;
  try {
    await lockStepObserver?.(`read ${basename(path)}`);
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const info = await handle.stat();
    if (!info.isFile() || info.size > MAX_LOCK_BYTES) return { holder: undefined, text: `<${info.isFile() ? 'large file' : 'not a file'} ${info.ino}>` };
    const bytes = new Uint8Array(info.size);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    const text = new TextDecoder().decode(bytes.subarray(0, bytesRead));
    return { holder: parseCommitHolder(text), text };
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return undefined;
    return rethrowIo(error, path);
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/**
 * Removes the lock at `path` judged stale while its text is `deadText`. Breakers take turns under
 * the break sub-lock `<lock>.break` (created as a lock is): under it the lock is read again and
 * removed only where it still holds `deadText` (a lock taken meanwhile, even on the very inode
 * number the dead one had, is left alone; only a breaker under the sub-lock removes another's lock,
 * so it cannot change between that read and the unlink). A sub-lock whose holder is dead (or, with
 * `breakAny`, any sub-lock) is moved aside (one breaker gets it) and removed where it holds the text
 * judged dead; where it holds another (a live breaker took it meanwhile) this breaker stops,
 * COMMIT_IN_PROGRESS, and leaves the moved file to a resume's cleanup: linking it back let two
 * breakers run at once and could leave a live process's sub-lock for good. Returns once the lock
 * was looked at under the sub-lock.
 */
async function breakLock(path: string, deadText: string, breakAny: boolean): Promise<void> {
  const breakPath = `${path}.break`;
  const breakerId = newWriterId();
  const mine = holderText(breakerId);
  for (let attempt = 0; attempt < BREAK_WAIT_ATTEMPTS; attempt += 1) {
    if (await createLockFile(breakPath, mine)) {
      try {
        const now = await readLock(path);
        if (now !== undefined && now.text === deadText) {
          await lockStepObserver?.(`remove ${basename(path)}`);
          await unlink(path).catch((error: unknown) => {
            if ((error as NodeJS.ErrnoException)?.code !== 'ENOENT') throw error;
          });
        }
      } catch (error) {
        return rethrowIo(error, path);
      } finally {
        // A sub-lock left behind (its removal failed) names this process: settled, later breakers remove it.
        if (!(await removeLockIfText(breakPath, mine))) markCommitSettled(breakerId);
      }
      return;
    }
    const found = await readLock(breakPath);
    if (found === undefined) continue;
    const state = found.holder === undefined ? 'unreadable' : judgeCommitHolder(found.holder);
    if (state === 'dead' || breakAny) {
      await removeAside(breakPath, found.text);
      continue;
    }
    await new Promise((done) => setTimeout(done, BREAK_WAIT_MS));
  }
  throw new SafetensorsError(
    'COMMIT_IN_PROGRESS',
    `the break lock ${quoteValue(breakPath)} stayed held while the commit lock was to be broken: another writer or resume of this directory may run; once none runs, pass { writerStopped: true } to resumeShardedModelWrite (or remove that file)`,
    { file: breakPath },
  );
}

/**
 * Removes the dead sub-lock at `path` (text `deadText`): renamed aside (atomic: of two breakers only
 * one gets the file), removed where the file moved holds `deadText`; else (a live breaker's, taken
 * after another breaker removed the dead one) COMMIT_IN_PROGRESS, the moved file left for a resume's
 * cleanup (that breaker goes on; this one must not run beside it).
 */
async function removeAside(path: string, deadText: string): Promise<void> {
  const aside = `${path.slice(0, -'.break'.length)}.stale-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    await lockStepObserver?.(`aside ${basename(path)}`);
    await rename(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return; // removed by another
    return rethrowIo(error, path);
  }
  const moved = await readLock(aside);
  if (moved !== undefined && moved.text !== deadText) {
    throw new SafetensorsError('COMMIT_IN_PROGRESS', `the break lock ${quoteValue(path)} was taken by another breaker while this one moved the dead one aside: another writer or resume of this directory breaks the commit lock now; try again once it finished`, { file: path });
  }
  await unlink(aside).catch(() => undefined);
}
