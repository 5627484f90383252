import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, readdir, truncate, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import {
  MAX_COMMIT_RECORD_BYTES,
  createShardedModelWriter,
  resumeShardedModelWrite,
  writeShardedModel,
} from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';
import { LOCK, RECORD, observe, snapshot, stopWriterAtStep, tensors } from './commit-fixtures.js';

/** How a record's text starts (a hidden `*.commit` file that does not is no record). */
const RECORD_START = '{\n "format": "splitzip-sharded-model-commit",';

afterEach(() => setCommitStepObserver(undefined));


/** The new model as an uninterrupted write leaves it: every file, byte for byte. */
async function referenceModel(dir: string, maxShardBytes: number): Promise<Record<string, string>> {
  const root = join(dir, 'reference');
  await writeShardedModel(root, tensors(2), { maxShardBytes });
  return snapshot(root);
}

/** The commit steps of an overwrite, in order. */
async function commitSteps(dir: string, maxShardBytes: number): Promise<string[]> {
  const root = join(dir, 'steps');
  await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
  const steps: string[] = [];
  setCommitStepObserver((step) => void steps.push(step));
  await writeShardedModel(root, tensors(2), { maxShardBytes });
  setCommitStepObserver(undefined);
  return steps;
}



describe('resumeShardedModelWrite', () => {
  for (const maxShardBytes of [4, 8]) {
    it(`finishes a commit stopped at every step, byte for byte (new maxShardBytes ${maxShardBytes}); readers name it; a second run finds nothing`, async () => {
      await withTempDir(async (dir) => {
        const reference = await referenceModel(dir, maxShardBytes);
        const steps = await commitSteps(dir, maxShardBytes);
        expect(steps[0]).toMatch(/^remove-shard /);
        expect(steps.at(-1)).toBe('remove-commit-record');
        const root = join(dir, 'm');
        let refused = 0;
        for (let k = 0; k < steps.length; k += 1) {
          await stopWriterAtStep(root, k, maxShardBytes);
          expect((await readdir(root)).includes(RECORD), steps[k]).toBe(true);
          // Opened by the directory or by its index's path (gone once the old index was removed).
          for (const seen of [await observe(root), await observe(join(root, 'model.safetensors.index.json'))]) {
            if (seen !== 'old' && seen !== 'new') {
              expect(seen, steps[k]).toContain(`resumeShardedModelWrite("${root}") finishes it`);
              refused += 1;
            }
          }
          expectCode(await catchErrorAsync(() => createShardedModelWriter(root, tensors(3), { maxShardBytes: 4 })), 'WRITE_COMMIT_PENDING');
          // The writer's commit has not settled (this process): its record is a live writer's.
          expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root)), 'COMMIT_IN_PROGRESS');
          const result = await resumeShardedModelWrite(root, { writerStopped: true });
          expect(await snapshot(root), steps[k]).toEqual(reference);
          expect(result.indexPath).toBe(join(root, 'model.safetensors.index.json'));
          expect(result.shardPaths).toEqual(Object.keys(reference).filter((n) => n.endsWith('.safetensors')).map((n) => join(root, n)));
          expect(await observe(root)).toBe('new');
          expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true })), 'COMMIT_RECORD_MISSING');
          expect(await snapshot(root)).toEqual(reference);
        }
        expect(refused).toBeGreaterThan(5);
      });
    });
  }

  it('a resume killed at any of its steps is finished by the next one', async () => {
    await withTempDir(async (dir) => {
      const reference = await referenceModel(dir, 8);
      const steps = await commitSteps(dir, 8);
      const root = join(dir, 'm');
      let tried = 0;
      for (let k = 0; k < steps.length; k += 1) {
        for (let j = 0; ; j += 1) {
          await stopWriterAtStep(root, k, 8);
          let calls = 0;
          setCommitStepObserver(() => {
            if (calls++ === j) throw new Error('killed (simulated)');
          });
          const outcome = await resumeShardedModelWrite(root, { writerStopped: true }).then(
            () => 'done',
            (error: Error) => error.message,
          );
          setCommitStepObserver(undefined);
          if (outcome === 'done') break;
          expect(outcome).toBe('killed (simulated)');
          tried += 1;
          await resumeShardedModelWrite(root, { writerStopped: true });
          expect(await snapshot(root), `writer ${steps[k]}, resume step ${j}`).toEqual(reference);
        }
      }
      expect(tried).toBeGreaterThan(steps.length);
    });
  });

  it('finishes the commit of a writer that failed (WRITE_INCOMPLETE) in this process, without writerStopped', async () => {
    await withTempDir(async (dir) => {
      const reference = await referenceModel(dir, 4);
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      setCommitStepObserver((step) => {
        if (step === 'rename-shard 2') throw Object.assign(new Error('no space (simulated)'), { code: 'ENOSPC' });
      });
      const error = await catchErrorAsync(() => writeShardedModel(root, tensors(2), { maxShardBytes: 4 }));
      setCommitStepObserver(undefined);
      expectCode(error, 'WRITE_INCOMPLETE');
      expect(error.message).toContain(`resumeShardedModelWrite("${root}")`);
      await resumeShardedModelWrite(root);
      expect(await snapshot(root)).toEqual(reference);
    });
  });

  it('a commit that fails before its first old file goes leaves no record (and the old model)', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      const before = await snapshot(root);
      setCommitStepObserver(() => {
        throw new Error('fault (simulated)');
      });
      await expect(writeShardedModel(root, tensors(2), { maxShardBytes: 4 })).rejects.toThrow('fault (simulated)');
      setCommitStepObserver(undefined);
      expect(await snapshot(root)).toEqual(before);
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root)), 'COMMIT_RECORD_MISSING');
    });
  });

  it('a damaged record (each field) or a shard gone is a typed error and changes nothing', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await stopWriterAtStep(root, 4, 4); // old model gone, shard 1 about to be renamed
      const recordPath = join(root, RECORD);
      const good = JSON.parse(await readFile(recordPath, 'utf8')) as Record<string, unknown>;
      const shard0 = (good.shards as Record<string, unknown>[])[0] as Record<string, unknown>;
      const withIndex = (index: string) => {
        const bytes = new TextEncoder().encode(index);
        return { index, indexBytes: bytes.length, indexSha256: createHash('sha256').update(bytes).digest('hex') };
      };
      const cases: [string, Record<string, unknown>][] = [
        ['format', { format: 'other' }],
        ['version', { version: 2 }],
        ['pid', { pid: 0 }],
        ['pid', { pid: 1.5 }],
        ['pid', { pid: '1' }],
        ['host', { host: 7 }],
        ['pidNamespace', { pidNamespace: 'pid:[x]' }],
        ['writerId', { writerId: 'zz' }],
        ['indexFileName', { indexFileName: 'other.safetensors.index.json' }],
        ['indexFileName', { indexFileName: '../model.safetensors.index.json' }],
        ['remove', { remove: 'model-00001-of-00003.safetensors' }],
        ['remove[0]', { remove: ['../x.safetensors'] }],
        ['remove[0]', { remove: ['/etc/x.safetensors'] }],
        ['remove[0]', { remove: ['x\0.safetensors'] }],
        ['remove[0]', { remove: ['config.json'] }],
        ['remove[1]', { remove: ['a.safetensors', 'a.safetensors'] }],
        // No file can have such a name (ENAMETOOLONG): refused before the real one before it is removed.
        ['remove[1]', { remove: ['model-00001-of-00003.safetensors', `${'a'.repeat(300)}.safetensors`] }],
        ['remove[1]', { remove: ['model-00001-of-00003.safetensors', `${'d/'.repeat(2100)}x.safetensors`] }],
        ['shards[0].ino', { shards: [{ ...shard0, ino: 7 }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0].ino', { shards: [{ ...shard0, ino: undefined }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards', { shards: [] }],
        ['shards[0]', { shards: [7] }],
        ['shards[0].name', { shards: [{ ...shard0, name: '../x' }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0].name', { shards: (good.shards as unknown[]).slice(1) }],
        ['shards[0].staged', { shards: [{ ...shard0, staged: '../x' }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0].staged', { shards: [{ ...shard0, staged: '.model-00002-of-00003.safetensors.tmp-1-0123456789ab' }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0].bytes', { shards: [{ ...shard0, bytes: -1 }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0].bytes', { shards: [{ ...shard0, bytes: 2 ** 53 }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[0]', { shards: [{ ...shard0, extra: 1 }, ...(good.shards as unknown[]).slice(1)] }],
        ['shards[1].staged', { shards: [shard0, { ...shard0, name: 'model-00002-of-00003.safetensors' }, (good.shards as unknown[])[2]] }],
        ['index', { index: 7 }],
        ['indexBytes', { indexBytes: (good.indexBytes as number) + 1 }],
        ['indexSha256', { indexSha256: '0'.repeat(64) }],
        ['index', withIndex('{"weight_map": {}}')],
        ['index', withIndex('not json')],
        ['extra', { extra: true }],
      ];
      const before = await snapshot(root, RECORD);
      const expectRefused = async (field: string, text: string | undefined) => {
        if (text !== undefined) await writeFile(recordPath, text);
        const error = await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true }));
        expectCode(error, 'COMMIT_RECORD_INVALID');
        expect(error.key, error.message).toBe(field);
        expect(error.file).toBe(recordPath);
        expect(await snapshot(root, RECORD)).toEqual(before);
      };
      for (const [field, change] of cases) await expectRefused(field, JSON.stringify({ ...good, ...change }));
      const text = JSON.stringify(good);
      await expectRefused('<file>', text.slice(0, -1));
      await expectRefused('pid', text.replace('{', '{"pid":1,'));
      await writeFile(recordPath, text);
      await truncate(recordPath, MAX_COMMIT_RECORD_BYTES + 1); // sparse: refused before it is read
      await expectRefused('<file>', undefined);

      // A staged shard gone, or of another size, in place or not: COMMIT_SHARD_MISSING, nothing changed.
      for (const damage of [(paths: string[]) => truncate(paths[1] as string, 10), (paths: string[]) => unlink(paths[2] as string)]) {
        await stopWriterAtStep(root, 5, 4); // shard 1 in place
        const now = JSON.parse(await readFile(recordPath, 'utf8')) as { shards: { staged: string }[] };
        await damage(now.shards.map((shard) => join(root, shard.staged)));
        // The stopped writer's lock aside (writerStopped breaks it): nothing else changes.
        const damaged = await snapshot(root, LOCK);
        const error = await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true }));
        expectCode(error, 'COMMIT_SHARD_MISSING');
        expect(error.message).toContain('write the model again');
        expect(await snapshot(root, LOCK)).toEqual(damaged);
      }
      await stopWriterAtStep(root, 5, 4);
      await truncate(join(root, 'model-00001-of-00003.safetensors'), 10);
      const damaged = await snapshot(root, LOCK);
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true })), 'COMMIT_SHARD_MISSING');
      expect(await snapshot(root, LOCK)).toEqual(damaged);
    });
  });

  it("refuses a record whose writer's pid is alive on this host (another process) unless writerStopped; a dead pid's goes on", async () => {
    await withTempDir(async (dir) => {
      const reference = await referenceModel(dir, 4);
      const root = join(dir, 'm');
      for (const [pid, alive] of [
        [process.ppid, true],
        [spawnSync(process.execPath, ['-e', '']).pid, false],
      ] as const) {
        await stopWriterAtStep(root, 2, 4);
        const recordPath = join(root, RECORD);
        const record = JSON.parse(await readFile(recordPath, 'utf8')) as Record<string, unknown>;
        await writeFile(recordPath, JSON.stringify({ ...record, pid }));
        // As a writer of that pid killed during its commit leaves it: its lock too.
        const lock = JSON.parse(await readFile(join(root, LOCK), 'utf8')) as Record<string, unknown>;
        await writeFile(join(root, LOCK), JSON.stringify({ ...lock, pid }));
        if (alive) {
          const error = await catchErrorAsync(() => resumeShardedModelWrite(root));
          expectCode(error, 'COMMIT_IN_PROGRESS');
          expect(error.message).toContain(`pid ${pid}`);
          await resumeShardedModelWrite(root, { writerStopped: true });
        } else {
          await resumeShardedModelWrite(root);
        }
        expect(await snapshot(root)).toEqual(reference);
      }
    });
  });

  it('with no record, resume is COMMIT_RECORD_MISSING; with several, it wants indexFileName', async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(dir, tensors(1), { maxShardBytes: 4 });
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(dir)), 'COMMIT_RECORD_MISSING');
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(join(dir, 'missing'))), 'COMMIT_RECORD_MISSING');
      await writeFile(join(dir, '.a.json.commit'), RECORD_START);
      await writeFile(join(dir, '.b.json.commit'), RECORD_START);
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(dir)), 'INVALID_ARGUMENT');
      const error = await catchErrorAsync(() => resumeShardedModelWrite(dir, { indexFileName: 'a.json' }));
      expectCode(error, 'COMMIT_RECORD_INVALID');
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(dir, { indexFileName: '../x' })), 'INVALID_ARGUMENT');
    });
  });

  it('a temp gone while an old shard of the same name and size is there (an abort killed halfway) is COMMIT_SHARD_MISSING: the old model kept, no mix', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      // Record written, nothing removed; 3 old shards -> 3 new ones of the same names and sizes.
      await stopWriterAtStep(root, 0, 4);
      const record = JSON.parse(await readFile(join(root, RECORD), 'utf8')) as { shards: { staged: string }[] };
      await unlink(join(root, (record.shards[1] as { staged: string }).staged));
      const before = await snapshot(root, LOCK);
      const error = await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true }));
      expectCode(error, 'COMMIT_SHARD_MISSING');
      expect(error.message).toContain('not that temp renamed');
      expect(error.message).toContain('the old model is whole: remove the record');
      expect(await snapshot(root, LOCK)).toEqual(before);
      expect(await observe(root)).toBe('old');
    });
  });

  it("removes every temp of the index and of the record (a killed resume's or writer's, of any pid)", async () => {
    await withTempDir(async (dir) => {
      const reference = await referenceModel(dir, 4);
      const root = join(dir, 'm');
      await stopWriterAtStep(root, 3, 4);
      for (const name of ['.model.safetensors.index.json.tmp-12345-0123456789ab', '..model.safetensors.index.json.commit.tmp-4321-abcdef012345', `${LOCK}.stale-77-0123456789ab`]) {
        await writeFile(join(root, name), 'x');
      }
      await resumeShardedModelWrite(root, { writerStopped: true });
      expect(await snapshot(root)).toEqual(reference);
    });
  });

  it('an unrelated hidden *.commit file is no record: it blocks no writer and adds no hint; without a record an open says nothing of one', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      await writeFile(join(root, '.notes.commit'), 'my own file');
      await writeShardedModel(root, tensors(2), { maxShardBytes: 4 });
      expect(await observe(root)).toBe('new');
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(root)), 'COMMIT_RECORD_MISSING');
      await unlink(join(root, 'model-00002-of-00003.safetensors'));
      const seen = await observe(root);
      expect(seen).toContain('INDEX_SHARD_MISSING');
      expect(seen).not.toContain('resumeShardedModelWrite');
      await unlink(join(root, '.notes.commit'));
      expect(await observe(root)).not.toContain('resumeShardedModelWrite');
    });
  });
});
