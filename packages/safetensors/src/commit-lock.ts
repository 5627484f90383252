import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, lstat, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { currentPidNamespace, judgeCommitHolder, parseCommitHolder, type CommitHolder } from './commit-record.js';
import { SafetensorsError } from './errors.js';
import { quoteValue } from './quote-value.js';
import { rethrowIo } from './rethrow-io.js';

/** A lock's text is a few hundred bytes; a larger file there is none of ours. */
const MAX_LOCK_BYTES = 4096;
/** Tries to take a lock that changes hands meanwhile (released, broken by another), before giving up. */
const LOCK_ATTEMPTS = 4;

/** `.<indexFileName>.commit.lock`: held by a writer's commit and by resumeShardedModelWrite, one at a time. */
export function commitLockNameFor(indexFileName: string): string {
  return `.${indexFileName}.commit.lock`;
}

/** A stale lock moved aside to be removed: `.<indexFileName>.commit.lock.stale-<pid>-<12 hex>`. */
export function isStaleLockName(name: string, indexFileName: string): boolean {
  const prefix = `${commitLockNameFor(indexFileName)}.stale-`;
  return name.startsWith(prefix) && /^\d{1,10}-[0-9a-f]{12}$/.test(name.slice(prefix.length));
}

export interface CommitLock {
  /** Removes the lock (where it is still this one); never throws. */
  release(): Promise<void>;
}

/**
 * Takes the commit lock of `indexFileName` in `root` (created exclusively, holding this process's
 * pid, host, pid namespace and `holderId`), before a commit or a resume removes anything: two of
 * them at once removed each other's new files. A lock held by another holder is COMMIT_IN_PROGRESS,
 * unless judgeCommitHolder finds it dead (its pid gone on this host and pid namespace; in this
 * process, settled) or `breakAny` (the caller's writerStopped): then it is broken (moved aside, so
 * that only one breaker removes it) and taken. A lock that cannot be read as a holder (a process
 * killed while writing it), or of another host or pid namespace, is broken only with `breakAny`.
 */
export async function acquireCommitLock(root: string, indexFileName: string, holderId: string, breakAny: boolean): Promise<CommitLock> {
  const path = join(root, commitLockNameFor(indexFileName));
  const holder: CommitHolder = { pid: process.pid, host: hostname(), pidNamespace: currentPidNamespace(), writerId: holderId };
  for (let attempt = 0; attempt < LOCK_ATTEMPTS; attempt += 1) {
    let handle: FileHandle | undefined;
    try {
      handle = await open(path, 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException)?.code !== 'EEXIST') return rethrowIo(error, path);
      const found = await readLock(path);
      if (found === undefined) continue; // released meanwhile
      // Its own lock, left by a release that failed: taken over.
      if (found.holder?.writerId === holderId) return lockAt(path, found.ino);
      const state = found.holder === undefined ? 'unreadable' : judgeCommitHolder(found.holder);
      if (state !== 'dead' && !breakAny) throw lockHeld(path, found.holder, state);
      await breakLock(path, found.ino);
      continue;
    }
    try {
      await handle.writeFile(JSON.stringify(holder));
      const { ino } = await handle.stat({ bigint: true });
      return lockAt(path, ino);
    } catch (error) {
      await unlink(path).catch(() => undefined);
      return rethrowIo(error, path);
    } finally {
      await handle.close().catch(() => undefined);
    }
  }
  throw new SafetensorsError('COMMIT_IN_PROGRESS', `the commit lock ${quoteValue(path)} changed hands ${LOCK_ATTEMPTS} times while being taken: another writer or resume of this directory runs; try again once it finished`, { file: path });
}

function lockAt(path: string, ino: bigint): CommitLock {
  return {
    release: async () => {
      try {
        // Only this lock: a holder whose lock was broken (writerStopped) leaves the next one's alone.
        if ((await lstat(path, { bigint: true })).ino === ino) await unlink(path);
      } catch {
        // Gone already, or cannot be removed: a later taker finds its holder settled (or dead) and breaks it.
      }
    },
  };
}

function lockHeld(path: string, holder: CommitHolder | undefined, state: 'alive' | 'unseen' | 'unreadable'): SafetensorsError {
  const who =
    state === 'unreadable'
      ? 'a holder it does not name (a process killed while taking it, or a file of something else)'
      : state === 'unseen'
        ? `pid ${holder?.pid} of host ${quoteValue(holder?.host)}${holder?.pidNamespace === null ? '' : ` in pid namespace ${holder?.pidNamespace}`}, a process this one cannot see`
        : `pid ${holder?.pid}, alive on this host`;
  return new SafetensorsError(
    'COMMIT_IN_PROGRESS',
    `the commit lock ${quoteValue(path)} is held by ${who}: a writer or resume of this directory may be committing now; once none runs, resumeShardedModelWrite(dir, { writerStopped: true }) breaks it (where a commit record is there; else remove the lock file)`,
    { file: path },
  );
}

/** The lock's holder (undefined: unreadable) and inode number; undefined where the lock is gone. */
async function readLock(path: string): Promise<{ holder: CommitHolder | undefined; ino: bigint } | undefined> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    const info = await handle.stat({ bigint: true });
    if (!info.isFile() || info.size > BigInt(MAX_LOCK_BYTES)) return { holder: undefined, ino: info.ino };
    const bytes = new Uint8Array(Number(info.size));
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    return { holder: parseCommitHolder(new TextDecoder().decode(bytes.subarray(0, bytesRead))), ino: info.ino };
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return undefined;
    return rethrowIo(error, path);
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/**
 * Removes the lock judged stale (inode `ino`): moved aside first (rename is atomic: of two
 * breakers only one moves it), then removed where it is still that file; a fresh lock moved by a
 * late breaker instead goes back.
 */
async function breakLock(path: string, ino: bigint): Promise<void> {
  const aside = `${path}.stale-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    await rename(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') return; // broken by another
    return rethrowIo(error, path);
  }
  try {
    if ((await lstat(aside, { bigint: true })).ino !== ino) {
      await link(aside, path).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException)?.code !== 'EEXIST') throw error;
      });
    }
    await unlink(aside);
  } catch (error) {
    return rethrowIo(error, aside);
  }
}
