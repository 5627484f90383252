import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import fsp, { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { countSettledCommits } from '../src/commit-record.js';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { createShardedModelWriter, resumeShardedModelWrite, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const names = ['a', 'b', 'c'];
const tensors = (fill: number): TensorToWrite[] => names.map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));
const RECORD = '.model.safetensors.index.json.commit';
const LOCK = '.model.safetensors.index.json.commit.lock';
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

const original = { open: fsp.open, rename: fsp.rename, lstat: fsp.lstat };
afterEach(() => {
  setCommitStepObserver(undefined);
  Object.assign(fsp, original);
  syncBuiltinESMExports();
});

async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) out[name] = (await readFile(join(dir, name))).toString('hex');
  return out;
}

/** A writer of the new model stopped for good before removing old shard 2, then its record and lock made a dead pid's (a kill -9). */
async function leaveDeadCommit(root: string, pid: number): Promise<void> {
  await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
  let reached!: () => void;
  const atStep = new Promise<void>((done) => (reached = done));
  setCommitStepObserver((step) => {
    if (step !== 'remove-shard model-00002-of-00003.safetensors') return undefined;
    reached();
    return new Promise<void>(() => undefined);
  });
  const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
  await writer.write(new Uint8Array(12).fill(2));
  void writer.close();
  await atStep;
  setCommitStepObserver(undefined);
  for (const name of [RECORD, LOCK]) {
    const value = JSON.parse(await readFile(join(root, name), 'utf8')) as Record<string, unknown>;
    await writeFile(join(root, name), JSON.stringify({ ...value, pid }, null, 1));
  }
}

const deadPid = (): number => spawnSync(process.execPath, ['-e', '']).pid as number;

describe('breaking a dead commit lock', () => {
  it('two resumes that both find the dead lock: one breaks and takes it, the other does not proceed, even where the new lock gets the dead one\'s inode number', async () => {
    await withTempDir(async (dir) => {
      const reference = join(dir, 'reference');
      await writeShardedModel(reference, tensors(2), { maxShardBytes: 4 });
      const root = join(dir, 'm');
      await leaveDeadCommit(root, deadPid());
      const lockPath = join(root, LOCK);
      const deadIno = (await stat(lockPath, { bigint: true })).ino;
      // Both resumes read the dead lock before either breaks it (the first two reads wait for each other).
      let reads = 0;
      let bothRead!: () => void;
      const barrier = new Promise<void>((done) => (bothRead = done));
      // ext4 hands a freed inode number out again at once: the lock taken after the break gets the
      // dead lock's number (mapped here, so that it does on any file system).
      let takenIno: bigint | undefined;
      const remap = <T extends { ino: bigint | number }>(info: T): T => (takenIno !== undefined && info.ino === takenIno ? Object.assign(Object.create(Object.getPrototypeOf(info) as object) as T, info, { ino: deadIno }) : info);
      let breaks = 0;
      Object.assign(fsp, {
        open: async (path: string, flags: string | number, ...rest: unknown[]) => {
          if (String(path) === lockPath && typeof flags === 'number' && reads < 2) {
            reads += 1;
            if (reads === 2) bothRead();
            await Promise.race([barrier, sleep(2000)]);
          }
          const handle = await (original.open as (...args: unknown[]) => Promise<fsp.FileHandle>)(path, flags, ...rest);
          if (String(path) === lockPath && flags === 'wx') {
            takenIno = (await handle.stat({ bigint: true })).ino;
            const stat = handle.stat.bind(handle);
            Object.assign(handle, { stat: async (options?: { bigint?: boolean }) => remap(await stat(options as { bigint: true })) });
          }
          return handle;
        },
        lstat: async (path: string, ...rest: unknown[]) => remap(await (original.lstat as (...args: unknown[]) => Promise<{ ino: bigint }>)(path, ...rest)),
        rename: async (from: string, to: string) => {
          // The second breaker moves the lock aside once the first one has taken it anew (a slow disk).
          if (String(from) === lockPath && String(to).includes('.stale-') && ++breaks === 2) {
            for (let i = 0; i < 200 && !existsSync(lockPath); i += 1) await sleep(5);
          }
          return original.rename(from, to);
        },
      });
      syncBuiltinESMExports();
      const outcomes = await Promise.allSettled([resumeShardedModelWrite(root), resumeShardedModelWrite(root)]);
      Object.assign(fsp, original);
      syncBuiltinESMExports();
      expect(reads).toBe(2);
      // The other met the lock held (or, waiting for the break sub-lock, found the commit finished).
      const codes = outcomes.map((outcome) => (outcome.status === 'fulfilled' ? 'resumed' : (outcome.reason as { code?: string }).code)).sort();
      expect(codes.filter((code) => code === 'resumed')).toHaveLength(1);
      expect(['COMMIT_IN_PROGRESS', 'COMMIT_RECORD_MISSING']).toContain(codes.find((code) => code !== 'resumed'));
      expect(await snapshot(root)).toEqual(await snapshot(reference));
    });
  });

  it('a break sub-lock left by a dead breaker is removed; a lock of a zombie (killed, not reaped) is a dead one\'s', async () => {
    await withTempDir(async (dir) => {
      const reference = join(dir, 'reference');
      await writeShardedModel(reference, tensors(2), { maxShardBytes: 4 });
      const root = join(dir, 'm');
      // A zombie: `sleep 0` exits, its parent (exec'd into `sleep 5`) never reaps it.
      const child = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 5'], { stdio: ['ignore', 'pipe', 'ignore'] });
      const zombie = Number(await new Promise<string>((done) => child.stdout.once('data', (chunk: Buffer) => done(chunk.toString()))));
      try {
        for (let i = 0; i < 100 && !(await readFile(`/proc/${zombie}/stat`, 'utf8')).includes(') Z'); i += 1) await sleep(10);
        expect(await readFile(`/proc/${zombie}/stat`, 'utf8')).toContain(') Z');
        await leaveDeadCommit(root, zombie);
        const sub = JSON.parse(await readFile(join(root, LOCK), 'utf8')) as Record<string, unknown>;
        await writeFile(join(root, `${LOCK}.break`), JSON.stringify({ ...sub, pid: deadPid(), writerId: 'f'.repeat(32) }));
        await resumeShardedModelWrite(root);
      } finally {
        child.kill('SIGKILL');
      }
      expect(await snapshot(root)).toEqual(await snapshot(reference));
    });
  });

  it('a writer is refused when it is created, not at close(), where the commit lock is held (a live holder, or one it cannot read)', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      const before = await snapshot(root);
      const live = { pid: process.ppid, host: (await import('node:os')).hostname(), pidNamespace: null, writerId: 'e'.repeat(32) };
      for (const text of ['', JSON.stringify(live)]) {
        await writeFile(join(root, LOCK), text);
        const error = await catchErrorAsync(() => createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 }));
        expectCode(error, 'COMMIT_IN_PROGRESS');
        expect(error.message).toContain(`resumeShardedModelWrite("${root}", { writerStopped: true })`);
        expect(await snapshot(root)).toEqual({ ...before, [LOCK]: Buffer.from(text).toString('hex') });
      }
    });
  });

  it('commits and resumes that leave nothing behind add no settled id (the set stays bounded in a long-lived process)', async () => {
    await withTempDir(async (dir) => {
      const before = countSettledCommits();
      for (let i = 0; i < 5; i += 1) await writeShardedModel(join(dir, 'm'), tensors(i), { maxShardBytes: 4 });
      const root = join(dir, 'r');
      await leaveDeadCommit(root, deadPid());
      await resumeShardedModelWrite(root);
      expect(countSettledCommits()).toBe(before);
    });
  });
});
