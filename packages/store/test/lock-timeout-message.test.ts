// LOCK_TIMEOUT said "held by pid X on H for more than 30000 ms" and nothing more: the time in
// milliseconds, and no word of what to do (wait, or remove another host's lock by hand if its
// writer is gone: no writer, gc included, ever breaks it). Now the time in human units and the next
// step for where the holder is, with the same fields in `details` (and the holder's state).
import { spawn, spawnSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { lockTimeoutError } from '../src/lock-timeout-error.js';
import type { LockHolder } from '../src/write-lock.js';
import { catchError, makeCache } from './helpers.js';

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

function holderRecord(fields: Partial<LockHolder>): LockHolder {
  return { pid: 1, host: hostname(), bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: Date.now(), ...fields };
}

describe('LOCK_TIMEOUT says how long in human units and what to do next', () => {
  it("a live holder of this host: wait for it, or a longer lockTimeoutMs; the lock is left alone", async () => {
    const { root, tensors } = await makeCache();
    const holder = holderRecord({ pid: process.ppid });
    await writeFile(join(root, 'lock'), JSON.stringify(holder));
    const store = await openCacheStore(root, { lockTimeoutMs: 150, compactOnClose: false });
    try {
      const error = await catchError(() => store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240));
      expect(error.code).toBe('LOCK_TIMEOUT');
      expect(error.message).toContain(`the lock is held by pid ${process.ppid} on ${hostname()} (this host) for more than 150 ms, and that process is running`);
      expect(error.message).toContain('wait for it to finish and try again');
      expect(error.message).toContain('lockTimeoutMs');
      expect(error.message).not.toContain('by hand');
      expect(error.path).toBe(join(root, 'lock'));
      expect(error.details).toMatchObject({ holder, holderState: 'running', timeoutMs: 150 });
      expect(error.details!.waitedMs).toBeGreaterThan(150);
      expect(JSON.parse(await readFile(join(root, 'lock'), 'utf8'))).toEqual(holder);
    } finally {
      await store.close();
    }
  });

  it.runIf(process.platform === 'linux')('a SIGSTOPped holder of this host is `stopped`: resume it with kill -CONT or end it, not "wait for it"', async () => {
    // It read "that process is running … wait for it to finish": a stopped writer never finishes.
    const { root, tensors } = await makeCache();
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      const pid = child.pid!;
      child.kill('SIGSTOP');
      // The state after the last ')' (a comm may hold spaces and parentheses) is T once it stopped.
      for (let i = 0; i < 500 && !/\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
      const holder = holderRecord({ pid });
      await writeFile(join(root, 'lock'), JSON.stringify(holder));
      const store = await openCacheStore(root, { lockTimeoutMs: 100, compactOnClose: false });
      try {
        const error = await catchError(() => store.aliasSlice(tensors[0]!.key, 'blocked', 0, 240));
        expect(error.code).toBe('LOCK_TIMEOUT');
        expect(error.message).toContain(`the lock is held by pid ${pid} on ${hostname()} (this host) for more than 100 ms, and that process is stopped (job control or SIGSTOP)`);
        expect(error.message).toContain(`resume it with \`kill -CONT ${pid}\` or end it`);
        expect(error.message).not.toContain('wait for it to finish');
        expect(error.details).toMatchObject({ holder, holderState: 'stopped', timeoutMs: 100 });
        expect(error.message).not.toContain('debugger');
        expect(JSON.parse(await readFile(join(root, 'lock'), 'utf8'))).toEqual(holder);
      } finally {
        await store.close();
      }
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });

  it("another host's holder: if that writer is gone, remove the lock by hand (gc does not); if not, wait", async () => {
    const { root } = await makeCache();
    const holder = holderRecord({ pid: deadPid(), host: 'some-other-host' });
    await writeFile(join(root, 'lock'), JSON.stringify(holder));
    const store = await openCacheStore(root, { lockTimeoutMs: 120 });
    try {
      const error = await catchError(() => store.gc());
      expect(error.code).toBe('LOCK_TIMEOUT');
      expect(error.message).toContain(`the lock is held by pid ${holder.pid} on some-other-host for more than 120 ms (another host`);
      expect(error.message).toContain(`if that writer is gone, remove ${join(root, 'lock')} by hand`);
      expect(error.message).toContain('`splitzip gc` neither');
      expect(error.message).toContain('if it is still running, wait for it to finish');
      expect(error.details).toMatchObject({ holder, holderState: 'other-host', timeoutMs: 120 });
      expect(JSON.parse(await readFile(join(root, 'lock'), 'utf8'))).toEqual(holder);
    } finally {
      await store.close();
    }
  });

  it("another host's holder in a container (another pid namespace) is another host's, not 'another pid namespace of this host'", async () => {
    // The holder's namespace differs from ours wherever it runs in a container; its host name says
    // it is not this host (isHolderDead judges the host first, as the message must).
    const { root } = await makeCache();
    const holder = holderRecord({ pid: 7, host: 'some-other-host', pidNamespace: 'pid:[4026532000]' });
    await writeFile(join(root, 'lock'), JSON.stringify(holder));
    const store = await openCacheStore(root, { lockTimeoutMs: 120 });
    try {
      const error = await catchError(() => store.gc());
      expect(error.code).toBe('LOCK_TIMEOUT');
      expect(error.message).toContain('on some-other-host for more than 120 ms (another host');
      expect(error.message).not.toContain('of this host');
      expect(error.details).toMatchObject({ holder, holderState: 'other-host' });
    } finally {
      await store.close();
    }
  });

  it('the default 30 s reads "30 s", not "30000 ms"; a holder in another pid namespace and an unparseable lock say theirs', () => {
    const path = '/c/lock';
    const running = lockTimeoutError(path, holderRecord({ pid: 42 }), { timeoutMs: 30_000, waitedMs: 30_004, foreignNamespace: false });
    expect(running.message).toMatch(/^LOCK_TIMEOUT: the lock is held by pid 42 on .* \(this host\) for more than 30 s, and that process is running/);
    expect(running.message).not.toMatch(/30000|ms/);
    expect(running.details).toMatchObject({ holderState: 'running', timeoutMs: 30_000, waitedMs: 30_004 });
    expect(running.retryable).toBe(true);

    const contained = lockTimeoutError(path, holderRecord({ pid: 7, pidNamespace: 'pid:[4026532000]' }), { timeoutMs: 120_000, waitedMs: 120_001, foreignNamespace: true });
    expect(contained.message).toContain('for more than 2 min (in another pid namespace of this host, pid:[4026532000]');
    expect(contained.message).toContain('if that writer is gone, remove /c/lock by hand');
    expect(contained.details).toMatchObject({ holderState: 'other-pid-namespace' });

    const unparseable = lockTimeoutError(path, undefined, { timeoutMs: 500, waitedMs: 501, foreignNamespace: false });
    expect(unparseable.message).toContain('for more than 500 ms by a lock file that names no holder');
    expect(unparseable.message).toContain('taken over once 10 s old');
    expect(unparseable.message).not.toContain('pid ?');
    expect(unparseable.details).toMatchObject({ holder: undefined, holderState: 'unparseable', timeoutMs: 500 });
  });
});
