// The CLI's LOCK_TIMEOUT line: the store's message is worded for library callers ("open the store
// with a longer lockTimeoutMs", no such CLI option); the CLI says the wait once, in seconds, who
// holds the lock where, and the next step (the process to check, the command to run).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openCacheStore, StoreError } from '@splitzip/store';
import { describe, expect, it } from 'vitest';
import { describeError } from '../src/describe-error.js';

const lockPath = '/caches/c1/lock';
const holder = { pid: 4242, host: 'node-7', bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: 0 };

/** A LOCK_TIMEOUT as the store throws it: its message (any wording) and its details. */
function lockTimeout(holderState: string, message: string, holderRecord: typeof holder | undefined = holder): StoreError {
  return new StoreError('LOCK_TIMEOUT', message, { path: lockPath, details: { holder: holderRecord, holderState, timeoutMs: 30_000, waitedMs: 30_012 } });
}

/** How many times a line states the wait: "30 s", "30000 ms", "30,000 ms". */
const countWaits = (line: string): number => line.match(/\b30(?:[,.]?000)? ?(?:s|ms)\b/g)?.length ?? 0;

describe('LOCK_TIMEOUT in the CLI', () => {
  it('a live holder of this host: the wait once in seconds, the pid to check, and what to run after', () => {
    const line = describeError(lockTimeout('running', 'the lock is held by pid 4242 on node-7 (this host) for more than 30000 ms, and that process is running; or open the store with a longer lockTimeoutMs'));
    expect(line).toBe(
      'LOCK_TIMEOUT: gave up after waiting 30 s for the writer lock of /caches/c1, held by pid 4242 on node-7 (this host; a live process: another build, gc or loader of this cache, ' +
        'or a stopped or hung one: `ps -p 4242`); let it finish, or end it, then run this again (`splitzip gc /caches/c1` removes a dead holder\'s lock)',
    );
    expect(countWaits(line)).toBe(1);
    expect(line).not.toMatch(/lockTimeoutMs/);
  });

  it('a stopped holder of this host (holderState stopped): resume it with kill -CONT or end it, not "let it finish"', () => {
    const line = describeError(lockTimeout('stopped', 'the lock is held by pid 4242 on node-7 (this host) for more than 30 s, and that process is stopped …'));
    expect(line).toBe(
      'LOCK_TIMEOUT: gave up after waiting 30 s for the writer lock of /caches/c1, held by pid 4242 on node-7 (this host; a stopped process: job control (Ctrl-Z) or SIGSTOP, ' +
        'so it never releases the lock); resume it with `kill -CONT 4242` or end it, then run this again',
    );
    expect(line).not.toMatch(/let it finish|lockTimeoutMs/);
  });

  // State t (held by a debugger) read as stopped, with kill -CONT, which does not resume a traced process.
  it('a traced holder of this host (holderState traced): continue it in the debugger or end it, no kill -CONT', () => {
    const line = describeError(lockTimeout('traced', 'the lock is held by pid 4242 on node-7 (this host) for more than 30 s, and that process is held by a debugger …'));
    expect(line).toBe(
      'LOCK_TIMEOUT: gave up after waiting 30 s for the writer lock of /caches/c1, held by pid 4242 on node-7 (this host; held by a debugger (traced), ' +
        'so it never releases the lock); continue it in the debugger, or end it, then run this again',
    );
    expect(line).not.toMatch(/kill -CONT|let it finish|lockTimeoutMs/);
  });

  it.runIf(process.platform === 'linux')("a real SIGSTOPped writer's lock: the store's LOCK_TIMEOUT reads stopped, and the line says kill -CONT", async () => {
    const root = await mkdtemp(join(tmpdir(), 'splitzip-stopped-'));
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = child.pid!;
      child.kill('SIGSTOP');
      for (let i = 0; i < 500 && !/\) [Tt] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      const store = await openCacheStore(root, { create: true, lockTimeoutMs: 100, compactOnClose: false });
      try {
        await writeFile(join(root, 'lock'), JSON.stringify({ ...holder, pid, host: hostname() }));
        const error = await store.gc().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ code: 'LOCK_TIMEOUT', details: { holderState: 'stopped' } });
        expect(describeError(error)).toBe(
          `LOCK_TIMEOUT: gave up after waiting 0.1 s for the writer lock of ${root}, held by pid ${pid} on ${hostname()} (this host; a stopped process: job control (Ctrl-Z) or SIGSTOP, ` +
            `so it never releases the lock); resume it with \`kill -CONT ${pid}\` or end it, then run this again`,
        );
      } finally {
        await store.close();
      }
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await rm(root, { recursive: true, force: true });
    }
  });

  it('a holder elsewhere (another host, another pid namespace): remove the lock by hand if it is gone, gc does not', () => {
    for (const [state, where] of [['other-host', 'another host'], ['other-pid-namespace', 'another pid namespace of this host']] as const) {
      const line = describeError(lockTimeout(state, 'the lock is held by pid 4242 on node-7 for more than 30 s (…): … or open the store with a longer lockTimeoutMs'));
      expect(line, state).toContain(`held by pid 4242 on node-7 (${where}`);
      expect(line, state).toContain(`if it is gone, remove ${lockPath} by hand (neither a writer nor \`splitzip gc\` takes over such a lock)`);
      expect(countWaits(line), state).toBe(1);
      expect(line, state).not.toMatch(/lockTimeoutMs/);
    }
  });

  it('a lock file that names no holder, after the CLI\'s 30 s: it never became 10 s old, so running again waits for ever; remove it by hand', () => {
    const line = describeError(lockTimeout('unparseable', 'the lock is held for more than 30 s by a lock file that names no holder …', undefined));
    expect(line).toBe(
      "LOCK_TIMEOUT: gave up after waiting 30 s for the writer lock of /caches/c1: its lock file names no holder (damaged, or not a writer's) and stayed younger than 10 s, " +
        "the age at which it is taken over, all that time: its modification time is ahead of this host's clock, or something keeps rewriting it; " +
        'if no build or gc of this cache is running, remove /caches/c1/lock by hand',
    );
    expect(line).not.toMatch(/run this again/);
  });

  it('a lock file that names no holder, after a wait shorter than 10 s (a library caller): when it is taken over, and what to run', () => {
    const error = new StoreError('LOCK_TIMEOUT', 'the lock is held …', { path: lockPath, details: { holder: undefined, holderState: 'unparseable', timeoutMs: 2_000, waitedMs: 2_010 } });
    expect(describeError(error)).toBe(
      "LOCK_TIMEOUT: gave up after waiting 2 s for the writer lock of /caches/c1: its lock file names no holder (damaged, or not a writer's); it is taken over once 10 s old: " +
        "run this again (`splitzip gc /caches/c1` removes a dead holder's lock)",
    );
  });

  it('the gc command to copy quotes a cache path with a space (it split into two arguments unquoted)', () => {
    const error = new StoreError('LOCK_TIMEOUT', 'the lock is held …', { path: '/caches/my cache/lock', details: { holder: undefined, holderState: 'unparseable', timeoutMs: 2_000, waitedMs: 2_010 } });
    expect(describeError(error)).toContain("run this again (`splitzip gc '/caches/my cache'` removes a dead holder's lock)");
  });

  it("a LOCK_TIMEOUT without the store's details keeps the store's message", () => {
    const bare = new StoreError('LOCK_TIMEOUT', 'the writer lock is held by pid 123 for 30 s', { path: lockPath });
    expect(describeError(bare)).toBe(`LOCK_TIMEOUT: the writer lock is held by pid 123 for 30 s (file ${lockPath})`);
  });
});
