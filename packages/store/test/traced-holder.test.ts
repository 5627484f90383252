// A holder in state t of /proc/<pid>/stat (held by a debugger: ptrace stop) was said to be stopped,
// "resume it with `kill -CONT <pid>`", but SIGCONT does not resume a traced process: only its tracer
// can. It is `traced` now (LOCK_TIMEOUT's holderState; NOT_A_CACHE being-created's holderTraced),
// with its own next step. A real traced process needs ptrace rights a test cannot count on, so the
// stat judgement is checked on fixture lines and the messages with /proc's answer given or stubbed.
import { writeFile, mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as WriteLock from '../src/write-lock.js';
import type { LockHolder } from '../src/write-lock.js';

const heldStates = new Map<number, 'stopped' | 'traced'>();
vi.mock('../src/write-lock.js', async (importOriginal) => {
  const original = await importOriginal<typeof WriteLock>();
  return { ...original, readPidHeldState: (pid: number) => heldStates.get(pid) ?? original.readPidHeldState(pid) };
});

const { processHeldStateFromStat } = await import('../src/write-lock.js');
const { lockTimeoutError } = await import('../src/lock-timeout-error.js');
const { openCacheStore } = await import('../src/index.js');
const { catchError, makeTempDir } = await import('./helpers.js');

afterEach(() => heldStates.clear());

function holderRecord(fields: Partial<LockHolder>): LockHolder {
  return { pid: 1, host: hostname(), bootId: null, startTicks: null, pidNamespace: null, token: '0123456789abcdef', createdMs: Date.now(), ...fields };
}

/** A /proc/<pid>/stat line (fields cut after the start time) with state `state` and command `comm`. */
function statLine(state: string, comm = 'node'): string {
  return `4242 (${comm}) ${state} 1 4242 4242 0 -1 4194560 1234 0 0 0 5 1 0 0 20 0 11 0 987654 1130000384 12000\n`;
}

describe('a traced holder (state t) is not said to resume with kill -CONT', () => {
  it('reads state T as stopped, t as traced, and any other as neither, after the last ")" of the command', () => {
    expect(processHeldStateFromStat(statLine('T'))).toBe('stopped');
    expect(processHeldStateFromStat(statLine('t'))).toBe('traced');
    for (const state of ['R', 'S', 'D', 'I', 'Z']) expect(processHeldStateFromStat(statLine(state))).toBeNull();
    // A command may hold spaces and ") t (" itself: the state is the field after the last ')'.
    expect(processHeldStateFromStat(statLine('S', 'a) t (b'))).toBeNull();
    expect(processHeldStateFromStat(statLine('t', 'x) T (y'))).toBe('traced');
  });

  it('LOCK_TIMEOUT of a traced holder of this host: holderState traced, continue it in the debugger, no kill -CONT', () => {
    const holder = holderRecord({ pid: 4242 });
    const error = lockTimeoutError('/c/lock', holder, { timeoutMs: 30_000, waitedMs: 30_001, foreignNamespace: false, heldState: 'traced' });
    expect(error.message).toBe(
      `LOCK_TIMEOUT: the lock is held by pid 4242 on ${hostname()} (this host) for more than 30 s, and that process is held by a debugger (traced), ` +
        'so it never releases the lock: continue it in the debugger, or end it, and try again (a process ended or killed leaves a lock the next writer takes over at once) (file /c/lock)',
    );
    expect(error.details).toMatchObject({ holder, holderState: 'traced' });

    const stopped = lockTimeoutError('/c/lock', holder, { timeoutMs: 30_000, waitedMs: 30_001, foreignNamespace: false, heldState: 'stopped' });
    expect(stopped.message).toContain('that process is stopped (job control or SIGSTOP), so it never releases the lock: resume it with `kill -CONT 4242` or end it');
    expect(stopped.details).toMatchObject({ holderState: 'stopped' });
  });

  it('a cache being created by a traced holder: holderStopped and holderTraced, continue it in the debugger', async () => {
    const root = await makeTempDir();
    await mkdir(join(root, 'blobs'));
    // This process: alive, so the lock is not a dead holder's; /proc's answer for it stubbed as traced.
    await writeFile(join(root, 'lock'), JSON.stringify(holderRecord({ pid: process.pid })));
    heldStates.set(process.pid, 'traced');
    const error = await catchError(() => openCacheStore(root));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain(`being created by pid ${process.pid} on ${hostname()} (this host)`);
    expect(error.message).toContain('; that process is held by a debugger (traced): continue it in the debugger, or end it, then open the cache again');
    expect(error.message).not.toContain('kill -CONT');
    expect(error.details).toMatchObject({ reason: 'being-created', holder: { pid: process.pid }, holderStopped: true, holderTraced: true });

    heldStates.set(process.pid, 'stopped');
    const stopped = await catchError(() => openCacheStore(root));
    expect(stopped.message).toContain(`that process is stopped (job control or SIGSTOP): resume it with \`kill -CONT ${process.pid}\` or end it`);
    expect(stopped.details).toMatchObject({ holderStopped: true, holderTraced: false });
  });
});
