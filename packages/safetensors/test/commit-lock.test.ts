import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { acquireCommitLock } from '../src/commit-lock.js';
import { newWriterId } from '../src/commit-record.js';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { createShardedModelWriter, resumeShardedModelWrite, writeShardedModel } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';
import { LOCK, RECORD, snapshot, tensors } from './commit-fixtures.js';

const here = fileURLToPath(new URL('.', import.meta.url));

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'index.cjs'))) throw new Error('build the package first (pnpm turbo run build --filter @splitzip/safetensors)');
});
afterEach(() => setCommitStepObserver(undefined));


/** Overwrites the old model in `root` and holds the commit at its first step `step` (returns the commit's release and its outcome). */
async function holdWriterAt(root: string, step: string): Promise<{ release: () => void; closed: Promise<unknown> }> {
  await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
  let release!: () => void;
  const released = new Promise<void>((done) => (release = done));
  let reached!: () => void;
  const atStep = new Promise<void>((done) => (reached = done));
  let held = false;
  setCommitStepObserver(async (seen) => {
    if (held || seen !== step) return;
    held = true;
    reached();
    await released;
  });
  const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
  await writer.write(new Uint8Array(12).fill(2));
  const closed = writer.close().then(
    () => 'closed',
    (error: unknown) => error,
  );
  await atStep;
  return { release, closed };
}

/** Makes the stopped writer's record and lock those of a dead process (as a writer killed -9 leaves them). */
async function makeWriterDead(root: string): Promise<void> {
  const pid = spawnSync(process.execPath, ['-e', '']).pid;
  for (const name of [RECORD, LOCK]) {
    if (!existsSync(join(root, name))) continue;
    const value = JSON.parse(await readFile(join(root, name), 'utf8')) as Record<string, unknown>;
    await writeFile(join(root, name), JSON.stringify({ ...value, pid }, null, 1));
  }
}

describe('the commit lock', () => {
  it('a second resume while one runs is COMMIT_IN_PROGRESS and changes nothing; the first finishes the new model', async () => {
    await withTempDir(async (dir) => {
      const reference = join(dir, 'reference');
      await writeShardedModel(reference, tensors(2), { maxShardBytes: 4 });
      const root = join(dir, 'm');
      await holdWriterAt(root, 'remove-shard model-00002-of-00003.safetensors');
      setCommitStepObserver(undefined);
      await makeWriterDead(root);
      // Resume A stops before renaming shard 2 (shard 1 in place); resume B comes then.
      let release!: () => void;
      const released = new Promise<void>((done) => (release = done));
      let reached!: () => void;
      const atStep = new Promise<void>((done) => (reached = done));
      let held = false;
      setCommitStepObserver(async (step) => {
        if (held || step !== 'resume-rename-shard 2') return;
        held = true;
        reached();
        await released;
      });
      const first = resumeShardedModelWrite(root);
      await atStep;
      const during = await snapshot(root);
      const error = await catchErrorAsync(() => resumeShardedModelWrite(root));
      expectCode(error, 'COMMIT_IN_PROGRESS');
      expect(error.message).toContain(`pid ${process.pid}, alive on this host`);
      expect(await snapshot(root)).toEqual(during);
      release();
      await first;
      expect(await snapshot(root)).toEqual(await snapshot(reference));
    });
  });

  it("a resume by another copy of the package in this process (CJS build) is refused while this process's writer commits", async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      const { release, closed } = await holdWriterAt(root, 'remove-shard model-00002-of-00003.safetensors');
      const cjs = createRequire(import.meta.url)(join(here, '..', 'dist', 'index.cjs')) as { resumeShardedModelWrite: typeof resumeShardedModelWrite };
      const during = await snapshot(root);
      const outcome = await cjs.resumeShardedModelWrite(root).then(
        () => 'resumed',
        (error: { code?: string }) => error.code,
      );
      expect(outcome).toBe('COMMIT_IN_PROGRESS');
      expect(await snapshot(root)).toEqual(during);
      release();
      expect(await closed).toBe('closed');
      const reference = join(dir, 'reference');
      await writeShardedModel(reference, tensors(2), { maxShardBytes: 4 });
      expect(await snapshot(root)).toEqual(await snapshot(reference));
    });
  });

  it('a lock of another host, or one that names no holder, is broken only with writerStopped; a writer meeting a held lock removes nothing', async () => {
    await withTempDir(async (dir) => {
      const reference = join(dir, 'reference');
      await writeShardedModel(reference, tensors(2), { maxShardBytes: 4 });
      for (const lockText of ['', 'other-host']) {
        const root = join(dir, `m-${lockText || 'empty'}`);
        await holdWriterAt(root, 'remove-shard model-00001-of-00003.safetensors');
        setCommitStepObserver(undefined);
        await makeWriterDead(root);
        if (lockText === '') await writeFile(join(root, LOCK), '');
        else {
          const lock = JSON.parse(await readFile(join(root, LOCK), 'utf8')) as Record<string, unknown>;
          await writeFile(join(root, LOCK), JSON.stringify({ ...lock, host: 'elsewhere' }));
        }
        const before = await snapshot(root);
        const error = await catchErrorAsync(() => resumeShardedModelWrite(root));
        expectCode(error, 'COMMIT_IN_PROGRESS');
        expect(error.message).toContain('writerStopped: true');
        expect(await snapshot(root)).toEqual(before);
        await resumeShardedModelWrite(root, { writerStopped: true });
        expect(await snapshot(root)).toEqual(await snapshot(reference));
      }
      // A writer whose commit finds the lock held (another's commit or resume): COMMIT_IN_PROGRESS, the old model kept.
      const root = join(dir, 'w');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      await writeFile(join(root, LOCK), '');
      const before = await snapshot(root);
      expectCode(await catchErrorAsync(() => writeShardedModel(root, tensors(2), { maxShardBytes: 4 })), 'COMMIT_IN_PROGRESS');
      expect(await snapshot(root)).toEqual(before);
    });
  });

  it('a holder whose lock was broken (writerStopped) and taken by another does not remove the new holder\'s lock on release', async () => {
    await withTempDir(async (dir) => {
      const index = 'model.safetensors.index.json';
      const first = await acquireCommitLock(dir, index, newWriterId(), false);
      const secondId = newWriterId();
      const second = await acquireCommitLock(dir, index, secondId, true);
      expect(await first.release()).toBe(false);
      expect((JSON.parse(await readFile(join(dir, LOCK), 'utf8')) as { writerId: string }).writerId).toBe(secondId);
      expect(await second.release()).toBe(true);
      expect(existsSync(join(dir, LOCK))).toBe(false);
    });
  });
});
