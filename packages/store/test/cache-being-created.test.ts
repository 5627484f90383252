// Opening a directory cache while its first writer creates it (a build's first run: the directory
// and blobs/ made, the writer lock taken, journal.1 and manifest.json not yet written) said
// NOT_A_CACHE "no manifest.json (open with create: true to make a new cache)", which that writer
// was doing. It is still NOT_A_CACHE (there is no cache to read yet), with details.reason
// 'being-created' naming the lock's live holder; without a live lock it is as before.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, symlink, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCacheStore, StoreError } from '../src/index.js';
import { LOCK_TEMP_MIN_AGE_MS } from '../src/limits.js';
import { markCacheBeingCreated } from '../src/mark-cache-being-created.js';
import { acquireLock, pidSpaceTag } from '../src/write-lock.js';
import { catchError, makeTempDir } from './helpers.js';

/** A cache directory as its creator leaves it before its first manifest: blobs/ and nothing else. */
async function makeCreatingDir(): Promise<string> {
  const root = await makeTempDir();
  await mkdir(join(root, 'blobs'));
  return root;
}

/**
 * A pid no process has, and none gets during the test: one above the kernel's pid_max (Linux
 * assigns none), or else a reaped child's, checked still absent. A reaped child's pid alone could
 * be reused by a new process before the open, which then read it as a live holder.
 */
function deadPid(): number {
  try {
    const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
    // The store's MAX_PID (2^22): a pid above it is no holder record at all (unparseable).
    if (Number.isSafeInteger(pidMax) && pidMax < 2 ** 22) return pidMax + 1;
  } catch {
    // not Linux: a reaped child's pid
  }
  const pid = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
  expect(() => process.kill(pid, 0)).toThrow();
  return pid;
}

function lockRecord(pid: number, host = hostname()): string {
  return JSON.stringify({ pid, host, bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: Date.now() });
}

describe('a directory cache being created', () => {
  it('under a live writer\'s lock (as the store takes it) is NOT_A_CACHE reason being-created naming the holder, not "open with create: true"', async () => {
    const root = await makeCreatingDir();
    // The creator's own lock record (pid, host, boot, start time, pid namespace), as openCacheStore's create takes it.
    const lock = await acquireLock(join(root, 'lock'), { timeoutMs: 1000 });
    try {
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('NOT_A_CACHE');
      expect(error.message).toMatch(
        new RegExp(`^NOT_A_CACHE: no manifest\\.json yet: the cache is being created by pid ${process.pid} on ${hostname()} \\(this host\\), which has held its writer lock for \\d+ (ms|s); open the cache again once it has written manifest\\.json`),
      );
      expect(error.message).not.toContain('create: true');
      expect(error.path).toBe(join(root, 'manifest.json'));
      expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid: process.pid, host: hostname(), token: lock.token }, holderStopped: false, lockPath: join(root, 'lock') });
      expect(error.details!.holder).not.toHaveProperty('dead');
    } finally {
      await lock.release();
    }
    // The lock let go, no manifest: as before.
    const after = await catchError(() => openCacheStore(root));
    expect(after.message).toContain('open with create: true');
    expect(after.details).toEqual({});
  });

  it("another host's holder cannot be judged: being created, with no time (its clock is not ours)", async () => {
    const root = await makeCreatingDir();
    await writeFile(join(root, 'lock'), lockRecord(4242, 'builder-7'));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain('the cache is being created by pid 4242 on builder-7, which holds its writer lock; open the cache again once it has written manifest.json');
    expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid: 4242, host: 'builder-7' }, holderStopped: false });
  });

  it.runIf(process.platform === 'linux')('a stopped creator (SIGSTOP): resume it with kill -CONT or end it', async () => {
    const root = await makeCreatingDir();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = child.pid!;
      child.kill('SIGSTOP');
      for (let i = 0; i < 500 && !/\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      await writeFile(join(root, 'lock'), lockRecord(pid));
      const error = await catchError(() => openCacheStore(root));
      expect(error.code).toBe('NOT_A_CACHE');
      expect(error.message).toContain(`being created by pid ${pid} on ${hostname()} (this host)`);
      expect(error.message).toContain(`that process is stopped (job control or SIGSTOP): resume it with \`kill -CONT ${pid}\` or end it, then open the cache again`);
      expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid }, holderStopped: true, holderTraced: false });
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });

  it.runIf(process.platform === 'linux')("a holder in another pid namespace of this host is never judged stopped by a pid of ours (that pid is another process here)", async () => {
    const root = await makeCreatingDir();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = child.pid!;
      child.kill('SIGSTOP');
      for (let i = 0; i < 500 && !/\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      await writeFile(join(root, 'lock'), JSON.stringify({ ...JSON.parse(lockRecord(pid)), pidNamespace: 'pid:[1]' }));
      const error = await catchError(() => openCacheStore(root));
      expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid }, holderStopped: false });
      expect(error.message).not.toContain('kill -CONT');
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });

  it("a dead holder's lock, or none, stays NOT_A_CACHE as before (no reason)", async () => {
    const root = await makeCreatingDir();
    await writeFile(join(root, 'lock'), lockRecord(deadPid()));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toBe(`NOT_A_CACHE: no manifest.json (open with create: true to make a new cache) (file ${join(root, 'manifest.json')})`);
    expect(error.details).toEqual({});
    const empty = await makeTempDir();
    expect((await catchError(() => openCacheStore(empty))).details).toEqual({});
  });
});

// Before its lock is linked, a creator's directory is empty (its mkdir done) or holds only the lock
// attempt's temp file (written, then linked as `lock`); both read NOT_A_CACHE "open with create:
// true". Now the store's create takes the lock right after its mkdir (blobs/ after), the temp file
// of a live process names the creator, and an empty directory is looked at once more.
describe('a directory cache before its creator has linked the lock', () => {
  const tempName = (pid: number, tag = pidSpaceTag()): string => `lock.tmp-${pid}-0123456789abcdef.${tag}`;

  it("holding only a live process's lock attempt (its record written) is being-created, naming it, still taking the lock", async () => {
    const root = await makeTempDir();
    await writeFile(join(root, tempName(process.pid)), lockRecord(process.pid));
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain(`no manifest.json yet: the cache is being created by pid ${process.pid} on ${hostname()} (this host), which is taking its writer lock; open the cache again once it has written manifest.json`);
    expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid: process.pid, host: hostname(), token: '0123456789abcdef' }, holderStopped: false, lockTaken: false });
  });

  it('holding a lock attempt not yet written (an empty temp file) names the process from its name', async () => {
    const root = await makeTempDir();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      await writeFile(join(root, tempName(child.pid!)), '');
      const error = await catchError(() => openCacheStore(root));
      expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid: child.pid, host: hostname() }, lockTaken: false });
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('an empty lock attempt LOCK_TEMP_MIN_AGE_MS old (or stamped as far ahead) is a killed attempt\'s, whatever process has its pid now', async () => {
    // An attempt killed between creating and writing its temp file leaves it empty; a new process
    // given its pid (here: this one) read as its creator for good.
    for (const offsetMs of [-2 * LOCK_TEMP_MIN_AGE_MS, 2 * LOCK_TEMP_MIN_AGE_MS]) {
      const root = await makeTempDir();
      const path = join(root, tempName(process.pid));
      await writeFile(path, '');
      const stamp = new Date(Date.now() + offsetMs);
      await utimes(path, stamp, stamp);
      expect((await catchError(() => openCacheStore(root))).details).toEqual({});
    }
    // Younger than that: still a creator between its open and its write.
    const fresh = await makeTempDir();
    const path = join(fresh, tempName(process.pid));
    await writeFile(path, '');
    const stamp = new Date(Date.now() - LOCK_TEMP_MIN_AGE_MS / 2);
    await utimes(path, stamp, stamp);
    expect((await catchError(() => openCacheStore(fresh))).details).toMatchObject({ reason: 'being-created', holder: { pid: process.pid }, lockTaken: false });
  });

  it('only a regular file is a lock attempt (not a directory or FIFO of that name), and only a pid from 1 written as the store writes it', async () => {
    const dirNamed = await makeTempDir();
    await mkdir(join(dirNamed, tempName(process.pid)));
    expect((await catchError(() => openCacheStore(dirNamed))).details).toEqual({});
    if (process.platform === 'linux') {
      const fifoNamed = await makeTempDir();
      execFileSync('mkfifo', [join(fifoNamed, tempName(process.pid))]);
      expect((await catchError(() => openCacheStore(fifoNamed))).details).toEqual({});
    }
    // A link of an attempt's name to a live record (tampering) is no attempt either: looked at before it is read.
    const linkNamed = await makeTempDir();
    await writeFile(join(linkNamed, 'record'), lockRecord(process.pid));
    await symlink(join(linkNamed, 'record'), join(linkNamed, tempName(process.pid)));
    expect((await catchError(() => openCacheStore(linkNamed))).details).toEqual({});
    // kill(0, 0) asks about this process's group, which is alive; '0<pid>' names this process in no name the store writes.
    for (const pidText of ['0', `0${process.pid}`]) {
      const root = await makeTempDir();
      await writeFile(join(root, `lock.tmp-${pidText}-0123456789abcdef.${pidSpaceTag()}`), '');
      expect((await catchError(() => openCacheStore(root))).details).toEqual({});
    }
  });

  it("a dead process's lock attempt, or another pid space's, is no creator: NOT_A_CACHE as before", async () => {
    const root = await makeTempDir();
    await writeFile(join(root, tempName(deadPid())), lockRecord(deadPid()));
    expect((await catchError(() => openCacheStore(root))).details).toEqual({});
    const other = await makeTempDir();
    await writeFile(join(other, tempName(process.pid, '00000000')), lockRecord(process.pid));
    expect((await catchError(() => openCacheStore(other))).details).toEqual({});
  });

  it('an empty directory is looked at once more: a creator whose lock comes meanwhile is named', async () => {
    const root = await makeTempDir();
    const missing = new StoreError('NOT_A_CACHE', 'no manifest.json (open with create: true to make a new cache)', { path: join(root, 'manifest.json') });
    let lock: Awaited<ReturnType<typeof acquireLock>> | undefined;
    const pauses: number[] = [];
    try {
      const marked = (await markCacheBeingCreated(missing, join(root, 'lock'), async (ms) => {
        pauses.push(ms);
        lock = await acquireLock(join(root, 'lock'), { timeoutMs: 1000 });
      })) as StoreError;
      expect(pauses).toHaveLength(1);
      expect(marked.details).toMatchObject({ reason: 'being-created', holder: { pid: process.pid, token: lock!.token }, lockTaken: true });
    } finally {
      await lock?.release();
    }
    // Still empty after the pause: NOT_A_CACHE as it was; a directory with something in it is not looked at again.
    expect(await markCacheBeingCreated(missing, join(root, 'lock'), async () => {})).toBe(missing);
    await mkdir(join(root, 'blobs'));
    expect(await markCacheBeingCreated(missing, join(root, 'lock'), async () => { throw new Error('looked again'); })).toBe(missing);
  });

  it("the store's create takes the lock before it makes blobs/ (a creator's directory is never blobs/ alone, with no lock)", async () => {
    const root = await makeTempDir();
    // Another creator holds the lock: this one's create gives up at once, having made nothing.
    const lock = await acquireLock(join(root, 'lock'), { timeoutMs: 1000 });
    try {
      expect((await catchError(() => openCacheStore(root, { create: true, lockTimeoutMs: 0 }))).code).toBe('LOCK_TIMEOUT');
      expect(existsSync(join(root, 'blobs'))).toBe(false);
    } finally {
      await lock.release();
    }
    const store = await openCacheStore(root, { create: true });
    await store.close();
    expect(existsSync(join(root, 'blobs'))).toBe(true);
  });
});
