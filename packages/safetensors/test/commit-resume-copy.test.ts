import { execFileSync } from 'node:child_process';
import { copyFile, readFile, readdir, rename, rm, truncate, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { resumeShardedModelWrite, writeShardedModel } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';
import { LOCK, RECORD, snapshot, stopWriterAtStep, tensors } from './commit-fixtures.js';


afterEach(() => setCommitStepObserver(undefined));



/** `cp -a`: every file a new inode number, names, bytes and times kept (a backup, another disk, a restore). */
async function copyDirectory(from: string, to: string): Promise<void> {
  await rm(to, { recursive: true, force: true });
  execFileSync('cp', ['-a', from, to]);
}

describe('resumeShardedModelWrite of a copied directory', () => {
  // 4: 3 old shards -> 3 new ones of the same names and sizes; 8: 3 -> 2.
  for (const maxShardBytes of [4, 8]) {
    it(`finishes the commit in a copy (cp -a) stopped at every step: staged temps by name and size, shards in place by the order of the renames (new maxShardBytes ${maxShardBytes})`, async () => {
      await withTempDir(async (dir) => {
        const reference = join(dir, 'reference');
        await writeShardedModel(reference, tensors(2), { maxShardBytes });
        const expected = await snapshot(reference, LOCK);
        const steps: string[] = [];
        const probe = join(dir, 'probe');
        await writeShardedModel(probe, tensors(1), { maxShardBytes: 4 });
        setCommitStepObserver((step) => void steps.push(step));
        await writeShardedModel(probe, tensors(2), { maxShardBytes });
        setCommitStepObserver(undefined);
        expect(steps).toContain('rename-shard 2');
        const root = join(dir, 'm');
        const copy = join(dir, 'copy');
        for (let k = 0; k < steps.length; k += 1) {
          await stopWriterAtStep(root, k, maxShardBytes);
          await copyDirectory(root, copy);
          // The stopped writer is this process's: writerStopped says it runs no more.
          await resumeShardedModelWrite(copy, { writerStopped: true });
          expect(await snapshot(copy, LOCK), steps[k]).toEqual(expected);
          expect((await readdir(copy)).filter((name) => name.startsWith(LOCK)), steps[k]).toEqual([]);
        }
      });
    });
  }

  it("a copy whose shard in place cannot be told from an old one is refused, the old model kept; the advice removes temps only while the old model is whole", async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      const copy = join(dir, 'copy');
      // Record written, nothing removed, then temp 2 gone (an abort killed halfway): old shard 2, same
      // name and size, under the final name; index and old shards there: no rename happened.
      await stopWriterAtStep(root, 0);
      await copyDirectory(root, copy);
      const record = JSON.parse(await readFile(join(copy, RECORD), 'utf8')) as { shards: { staged: string; name: string }[] };
      await unlink(join(copy, (record.shards[1] as { staged: string }).staged));
      const before = await snapshot(copy, LOCK);
      let error = await catchErrorAsync(() => resumeShardedModelWrite(copy, { writerStopped: true }));
      expectCode(error, 'COMMIT_SHARD_MISSING');
      expect(error.message).toContain('the old model is whole: remove the record');
      expect(await snapshot(copy, LOCK)).toEqual(before);

      // Old shards removed and shard 1 in place, then temp 3 damaged: the temps are the only copy of
      // the new shards; the message must not tell to remove them.
      const renameStep = 4; // remove-shard x3, remove-index, then rename-shard 1 (stopped before rename-shard 2)
      await stopWriterAtStep(root, renameStep + 1);
      await copyDirectory(root, copy);
      const now = JSON.parse(await readFile(join(copy, RECORD), 'utf8')) as { shards: { staged: string; name: string }[] };
      await truncate(join(copy, (now.shards[2] as { staged: string }).staged), 10);
      const damaged = await snapshot(copy, LOCK);
      error = await catchErrorAsync(() => resumeShardedModelWrite(copy, { writerStopped: true }));
      expectCode(error, 'COMMIT_SHARD_MISSING');
      expect(error.message).not.toMatch(/remove the record|remove[^;]*temps/);
      expect(error.message).toContain('keep them');
      expect(error.message).toContain(`${(now.shards[1] as { staged: string }).staged} -> model-00002-of-00003.safetensors`);
      expect(await snapshot(copy, LOCK)).toEqual(damaged);
    });
  });

  // Each part of the rule that takes a shard in place of another inode ("the renames provably
  // happened"), alone: a state where only that part tells that they did not.
  describe('a shard in place of another inode is refused, nothing changed, where', () => {
    type Record = { shards: { staged: string; name: string }[] };
    const refuse = async (copy: string): Promise<void> => {
      const before = await snapshot(copy, LOCK);
      expectCode(await catchErrorAsync(() => resumeShardedModelWrite(copy, { writerStopped: true })), 'COMMIT_SHARD_MISSING');
      expect(await snapshot(copy, LOCK)).toEqual(before);
    };

    it('an old file not in place is there (index gone, shards in order)', async () => {
      await withTempDir(async (dir) => {
        const old = join(dir, 'old');
        await writeShardedModel(old, tensors(1), { maxShardBytes: 4 });
        const root = join(dir, 'm');
        const copy = join(dir, 'copy');
        await stopWriterAtStep(root, 5); // shard 1 in place, 2 and 3 staged, old files and index gone
        await copyDirectory(root, copy);
        await copyFile(join(old, 'model-00003-of-00003.safetensors'), join(copy, 'model-00003-of-00003.safetensors'));
        await refuse(copy);
      });
    });

    it('the old index is there (shards in order, no old file but those in place)', async () => {
      await withTempDir(async (dir) => {
        const old = join(dir, 'old');
        await writeShardedModel(old, tensors(1), { maxShardBytes: 4 });
        const root = join(dir, 'm');
        const copy = join(dir, 'copy');
        await stopWriterAtStep(root, 5);
        await copyDirectory(root, copy);
        await copyFile(join(old, 'model.safetensors.index.json'), join(copy, 'model.safetensors.index.json'));
        await refuse(copy);
      });
    });

    it('a shard is in place after one still staged (index and old files gone)', async () => {
      await withTempDir(async (dir) => {
        const root = join(dir, 'm');
        const copy = join(dir, 'copy');
        await stopWriterAtStep(root, 5, 8); // 3 -> 2 shards (other names): shard 1 in place, 2 staged
        await copyDirectory(root, copy);
        const record = JSON.parse(await readFile(join(copy, RECORD), 'utf8')) as Record;
        const [first, second] = record.shards as [Record['shards'][number], Record['shards'][number]];
        await rename(join(copy, first.name), join(copy, first.staged));
        await rename(join(copy, second.staged), join(copy, second.name));
        await refuse(copy);
      });
    });
  });
});
