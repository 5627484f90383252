// A writer killed while it held the lock, under a parent that has not reaped it (a supervisor that
// never waits, a PID 1 that does not reap), is a zombie: kill(pid, 0) still succeeds and its start
// time is unchanged, so the lock was judged live and every writer, gc included, got LOCK_TIMEOUT
// until the parent waited for it. Zombies (state Z in /proc/<pid>/stat) are dead holders now.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { isPidDead, readProcessStartTicks } from '../src/write-lock.js';
import { makeCache, removeTempDirs } from './helpers.js';

afterAll(removeTempDirs);

const state = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];

it.runIf(existsSync('/proc/self/stat'))('a lock held by a killed, unreaped writer (a zombie) is recovered', async () => {
  // `sh` starts a sleeper in the background and becomes `sleep` itself (exec), which never reaps:
  // the sleeper, once killed, stays a zombie of it.
  const parent = spawn('sh', ['-c', 'sleep 300 & echo $!; exec sleep 300'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const pid = Number(await new Promise<string>((resolve) => parent.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()))));
    const startTicks = readProcessStartTicks(pid);
    expect(isPidDead(pid)).toBe(false);
    const { root } = await makeCache();
    await writeFile(join(root, 'lock'), JSON.stringify({ pid, host: hostname(), bootId: null, startTicks, token: 'aaaaaaaaaaaaaaaa', createdMs: Date.now() }));
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && state(pid) !== 'Z'; i += 1) await sleep(10);
    expect(state(pid)).toBe('Z');
    expect(isPidDead(pid)).toBe(true);
    const store = await openCacheStore(root, { lockTimeoutMs: 3000 });
    try {
      const report = await store.gc();
      expect(report.staleLocks).toContain('lock');
    } finally {
      await store.close();
    }
  } finally {
    parent.kill('SIGKILL');
  }
});
