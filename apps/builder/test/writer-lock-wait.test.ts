// Another live writer holding the cache's lock (a stopped build): a build waited 30 s in silence
// before LOCK_TIMEOUT, and verify of a cache being created said NOT_A_CACHE ("run build").
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt, collect, runCli, startCli } from './helpers/run-cli.js';
import type { AddEntryInput, AddEntryResult } from '@splitzip/store';
import { watchCommits } from '../src/build-cache.js';
import type { CommitBatcher } from '../src/create-commit-batcher.js';
import { watchWriterLock } from '../src/watch-writer-lock.js';

let temp: TempDir;
let model: string;
const holders: ChildProcess[] = [];
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('a', [64, 64], 1), gaussianBf16('b', [32, 64], 2)]);
});
afterEach(() => {
  for (const child of holders.splice(0)) child.kill('SIGKILL');
});
afterAll(async () => temp?.cleanup());

/** A live process of this host, standing in for a stopped writer. */
function startHolder(): number {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120000)'], { stdio: 'ignore' });
  holders.push(child);
  return child.pid!;
}

/** The store's lock record for `pid` (its README, "Concurrency mechanism"). */
async function writeLock(cacheDir: string, pid: number, token = '0123456789abcdef'): Promise<void> {
  await mkdir(cacheDir, { recursive: true });
  await writeFile(join(cacheDir, 'lock'), JSON.stringify({ pid, host: hostname(), bootId: null, startTicks: null, token, createdMs: Date.now() }));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await sleep(20);
  }
}

describe('watchWriterLock', () => {
  it('reports a holding of the lock by another process that lasts while a call is pending, once per holding', async () => {
    const dir = join(temp.path, 'watch');
    const pid = startHolder();
    await writeLock(dir, pid, 'aaaaaaaaaaaaaaaa');
    const waits: [number, number][] = [];
    const watch = watchWriterLock(dir, { onWait: (holder, heldMs) => waits.push([holder.pid, heldMs]), noticeAfterMs: 100, intervalMs: 10 });
    // Nothing pending: nothing said, however long it is held.
    await sleep(200);
    expect(waits).toEqual([]);
    await watch.during(sleep(400));
    expect(waits.map(([p]) => p)).toEqual([pid]);
    expect(waits[0]![1]).toBeGreaterThanOrEqual(100);
    // The same holding again: said already. A new one (another token): said.
    await watch.during(sleep(300));
    expect(waits).toHaveLength(1);
    await writeLock(dir, pid, 'bbbbbbbbbbbbbbbb');
    await watch.during(sleep(400));
    expect(waits).toHaveLength(2);
    // This process's own lock (its commit) is no wait.
    await writeLock(dir, process.pid, 'cccccccccccccccc');
    await watch.during(sleep(300));
    expect(waits).toHaveLength(2);
    watch.stop();
  });
});

describe('a commit staging its blob is not waiting for the lock', () => {
  it('watchWriterLock counts a call only from its waitingFrom on', async () => {
    const dir = join(temp.path, 'watch-staging');
    const pid = startHolder();
    await writeLock(dir, pid, 'dddddddddddddddd');
    const waits: number[] = [];
    const watch = watchWriterLock(dir, { onWait: (holder) => waits.push(holder.pid), noticeAfterMs: 300, intervalMs: 10 });
    // Held all along, but the call asks for the lock only for its last 50 ms: no wait to tell.
    await watch.during(sleep(450), sleep(400));
    expect(waits).toEqual([]);
    // A call whose waitingFrom never comes (an entry already there: no blob, no lock) is never counted.
    await watch.during(sleep(300), new Promise(() => {}));
    expect(waits).toEqual([]);
    // Waiting from 100 ms on, for 700 ms: told.
    await watch.during(sleep(800), sleep(100));
    expect(waits).toEqual([pid]);
    watch.stop();
  });

  it('a build’s commit is watched only once its payload is written (onPayloadWritten), its alias at once', async () => {
    const dir = join(temp.path, 'watch-commits');
    const pid = startHolder();
    await writeLock(dir, pid, 'eeeeeeeeeeeeeeee');
    const waits: number[] = [];
    const watch = watchWriterLock(dir, { onWait: (holder) => waits.push(holder.pid), noticeAfterMs: 300, intervalMs: 10 });
    const released: string[] = [];
    // As the directory store: the payload written (400 ms: a large blob), then its hook, then the lock (50 ms).
    const store: CommitBatcher = {
      addEntry: async (input: AddEntryInput): Promise<AddEntryResult> => {
        await sleep(400);
        input.onPayloadWritten?.();
        await sleep(50);
        return { key: input.key, added: true, slicesBound: 1 };
      },
      aliasSlice: async () => {
        await sleep(800);
        return true;
      },
      unbindSlice: async () => true,
    };
    const commits = watchCommits(store, (task, waitingFrom) => watch.during(task, waitingFrom));
    const input = { key: 'k', qualname: 'q', payload: new Uint8Array(0), shape: [0], dtype: 'BF16' as const, onPayloadWritten: () => released.push('slab') };
    expect(await commits.addEntry(input)).toEqual({ key: 'k', added: true, slicesBound: 1 });
    // The build's own hook still runs (the payload's slab room goes back there).
    expect(released).toEqual(['slab']);
    expect(waits).toEqual([]);
    // An alias waits for the lock from the start.
    expect(await commits.aliasSlice({ key: 'k', shardName: 's', offsetBytes: 0, sizeBytes: 2 })).toBe(true);
    expect(waits).toEqual([pid]);
    watch.stop();
  });
});

describe('a build behind a lock file that names no holder', () => {
  // An unparseable lock (damaged, or another tool's): the store takes it over only once it is
  // UNPARSEABLE_LOCK_STALE_MS (10 s) old, and the build waited that long saying nothing.
  it('says so once, on stderr, and finishes once the store took the file over', { timeout: 60_000 }, async () => {
    const cacheDir = join(temp.path, 'c-unreadable-lock');
    await mkdir(cacheDir, { recursive: true });
    await writeFile(join(cacheDir, 'lock'), Buffer.from([0x8f, 0x13, 0x00, 0x7a, 0xfe, 0x21]));
    const child = startCli(['build', model, '--out', cacheDir, '--quiet']);
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const result = collect(child, 50_000);
    await waitFor(() => stderr.includes('waiting for the writer lock'), 9_000);
    expect(stderr).toBe(`splitzip build: waiting for the writer lock of ${cacheDir}: its lock file names no holder (damaged, or not this tool's), and is taken over once 10 s old\n`);
    const { code, stdout, stderr: allErr } = await result;
    expect(code).toBe(0);
    expect(allErr.match(/waiting for the writer lock/g)).toHaveLength(1);
    expect(stdout).toMatch(/tensors 2: 2 encoded/);
  });
});

describe('a build behind another writer’s lock', () => {
  for (const [what, existing] of [
    ['creating a cache', false],
    ['committing to a cache', true],
  ] as const) {
    it(`says once, on stderr, which pid it waits for (${what}), and finishes once the lock is gone`, { timeout: 60_000 }, async () => {
      const cacheDir = join(temp.path, `c-${what.replace(/ /g, '-')}`);
      if (existing) {
        // A cache holding one of the two tensors: the build commits the other.
        const half = await writeSingleFileModel(join(temp.path, 'half.safetensors'), [gaussianBf16('a', [64, 64], 1)]);
        expect((await runCli(['build', half, '--out', cacheDir, '--quiet'])).code).toBe(0);
      }
      const pid = startHolder();
      await writeLock(cacheDir, pid);
      const child = startCli(['build', model, '--out', cacheDir, '--quiet']);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const result = collect(child, 50_000);
      const started = Date.now();
      await waitFor(() => stderr.includes('waiting for the writer lock'), 20_000);
      // After a short delay, not at once, and well before the 30 s timeout.
      expect(Date.now() - started).toBeGreaterThan(1000);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(stderr).toBe(`splitzip build: waiting for the writer lock of ${cacheDir}, held by pid ${pid} (another build or gc of this cache, busy or stopped); gives up after 30 s\n`);
      await unlink(join(cacheDir, 'lock'));
      const { code, stdout, stderr: allErr } = await result;
      expect(code).toBe(0);
      expect(allErr.match(/waiting for the writer lock/g)).toHaveLength(1);
      expect(stdout).not.toMatch(/waiting/);
      expect(stdout).toMatch(existing ? /tensors 2: 1 encoded, 1 already cached/ : /tensors 2: 2 encoded/);
    });
  }

  it('verify of a directory a running writer is creating says so, naming it; a dead one’s lock is NOT_A_CACHE as before', async () => {
    const creating = join(temp.path, 'being-created');
    const pid = startHolder();
    await writeLock(creating, pid);
    for (const command of ['verify', 'inspect', 'gc']) {
      const result = await runCli([command, creating]);
      expect(result.code, command).toBe(1);
      expect(result.stderr, command).toBe(
        `splitzip ${command}: error: CACHE_BEING_CREATED: a cache is being created at ${creating} by pid ${pid}: it holds the cache's writer lock and has not written manifest.json yet (a build starting); run ${command} again once it has\n`,
      );
    }
    holders.splice(0).forEach((child) => child.kill('SIGKILL'));
    await waitFor(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, 10_000);
    const dead = await runCli(['verify', creating]);
    expect(dead.code).toBe(1);
    // Only the dead writer's lock there: a first build stopped before its first commit (1d51c91).
    expect(dead.stderr).toMatch(/NOT_A_CACHE: .* is not a SplitZip cache yet: a first build into it stopped before its first commit \(it left lock, and no manifest\.json\); `splitzip build <model> --out .*` starts it again/);
  });

  it.runIf(process.platform === 'linux')('verify of a directory a stopped (SIGSTOP) writer is creating says it is stopped and names kill -CONT; --json carries CACHE_BEING_CREATED', async () => {
    // It said "run verify again once it has", which a stopped writer never does.
    const creating = join(temp.path, 'being-created-stopped');
    const pid = startHolder();
    process.kill(pid, 'SIGSTOP');
    try {
      await waitFor(() => /\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8')), 10_000);
      await writeLock(creating, pid);
      const line = `CACHE_BEING_CREATED: a cache is being created at ${creating} by pid ${pid}, which is stopped (job control or SIGSTOP) holding the cache's writer lock before writing manifest.json: resume it with \`kill -CONT ${pid}\` or end it, then run verify again`;
      const result = await runCli(['verify', creating]);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`splitzip verify: error: ${line}\n`);
      const json = await runCli(['verify', creating, '--json']);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout).error).toMatchObject({ code: 'CACHE_BEING_CREATED', message: line, file: creating, holder: { pid }, holderStopped: true, holderTraced: false });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });

  it('a lock left by a build of an earlier boot names a pid another live process has now: NOT_A_CACHE, not "being created" for ever', async () => {
    const leftover = join(temp.path, 'earlier-boot');
    await mkdir(leftover, { recursive: true });
    // pid 1 is alive (init, or this container's first process); the boot is not this one.
    await writeFile(join(leftover, 'lock'), JSON.stringify({ pid: 1, host: hostname(), bootId: 'not-this-boot-0000', startTicks: null, token: 'fedcba9876543210', createdMs: Date.now() }));
    const result = await runCli(['verify', leftover]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/NOT_A_CACHE/);
    expect(result.stderr).not.toMatch(/being created/);
  });
});

// Ctrl-C while waiting for a stopped writer's lock: gc ignored it for the whole 30 s wait and ended
// LOCK_TIMEOUT (exit 1); a build ended at 130 only once its wait was over.
describe('Ctrl-C while waiting for another writer’s lock', () => {
  for (const command of ['gc', 'build'] as const) {
    it(`${command} stops at once, exit 130, the holder's lock left as it is`, { timeout: 60_000 }, async () => {
      const cacheDir = join(temp.path, `ctrl-c-${command}`);
      // A cache of one of the two tensors: the build has the other to commit.
      const half = await writeSingleFileModel(join(temp.path, `ctrl-c-half-${command}.safetensors`), [gaussianBf16('a', [64, 64], 1)]);
      expect((await runCli(['build', half, '--out', cacheDir, '--quiet'])).code).toBe(0);
      const pid = startHolder();
      await writeLock(cacheDir, pid);
      const args = command === 'gc' ? ['gc', cacheDir] : ['build', model, '--out', cacheDir, '--quiet'];
      const child = startCli(args);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      // Well inside the 30 s lock timeout: a Ctrl-C that does not end the wait fails here.
      const result = collect(child, 20_000);
      await waitFor(() => stderr.includes('waiting for the writer lock'), 15_000);
      child.kill('SIGINT');
      const { code, stderr: allErr } = await result;
      expect(code, allErr).toBe(130);
      expect(allErr).not.toMatch(/LOCK_TIMEOUT/);
      const { readFile } = await import('node:fs/promises');
      expect(JSON.parse(await readFile(join(cacheDir, 'lock'), 'utf8')).pid).toBe(pid);
    });
  }
});
