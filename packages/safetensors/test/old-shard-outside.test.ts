import { access, mkdir, readdir, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { createShardedModelWriter, openSafetensorsModel, resumeShardedModelWrite, writeSafetensorsFile, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const tensors = (fill: number): TensorToWrite[] => ['a', 'b'].map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

afterEach(() => setCommitStepObserver(undefined));

/**
 * dir/m: an old model whose index names its one shard `sub/x.safetensors`, `sub` a real directory
 * inside; dir/outside/x.safetensors: a file of someone else's, which `sub` may be made to link to.
 */
async function makeOldModel(dir: string): Promise<{ root: string; outsideFile: string; linkSubOutside: () => Promise<void> }> {
  const root = join(dir, 'm');
  await mkdir(join(root, 'sub'), { recursive: true });
  await writeSafetensorsFile(join(root, 'sub', 'x.safetensors'), tensors(1));
  await writeFile(join(root, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: { a: 'sub/x.safetensors', b: 'sub/x.safetensors' } }));
  await mkdir(join(dir, 'outside'));
  const outsideFile = join(dir, 'outside', 'x.safetensors');
  await writeSafetensorsFile(outsideFile, tensors(9));
  const linkSubOutside = async () => {
    await rename(join(root, 'sub'), join(dir, 'old-sub'));
    await symlink(join(dir, 'outside'), join(root, 'sub'));
  };
  return { root, outsideFile, linkSubOutside };
}

describe('old shards that lie outside the model directory (a linked directory on their path)', () => {
  it('the sharded writer refuses (INDEX_SHARD_OUTSIDE, before anything is written) to remove them; the file outside stays', async () => {
    await withTempDir(async (dir) => {
      const { root, outsideFile, linkSubOutside } = await makeOldModel(dir);
      await linkSubOutside();
      const before = (await readdir(root)).sort();
      const error = await catchErrorAsync(() => writeShardedModel(root, tensors(2), { maxShardBytes: 4 }));
      expectCode(error, 'INDEX_SHARD_OUTSIDE');
      expect(error.file).toBe(join(root, 'model.safetensors.index.json'));
      expect(error.message).toContain('"sub/x.safetensors"');
      expect(error.message).toContain('nothing was removed');
      await access(outsideFile);
      expect((await readdir(root)).sort()).toEqual(before);
      // The reader refuses that index too (rule 19).
      expectCode(await catchErrorAsync(() => openSafetensorsModel(root)), 'INDEX_SHARD_OUTSIDE');
    });
  });

  it('checked again at close(): a link swapped in after the writer started is refused before the first removal; the temps go', async () => {
    await withTempDir(async (dir) => {
      const { root, outsideFile, linkSubOutside } = await makeOldModel(dir);
      const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
      await writer.write(new Uint8Array(8).fill(2));
      await linkSubOutside();
      expectCode(await catchErrorAsync(() => writer.close()), 'INDEX_SHARD_OUTSIDE');
      await access(outsideFile);
      expect((await readdir(root)).sort()).toEqual(['model.safetensors.index.json', 'sub']);
    });
  });

  it('an old shard in a real subdirectory is still removed', async () => {
    await withTempDir(async (dir) => {
      const { root } = await makeOldModel(dir);
      await writeShardedModel(root, tensors(2), { maxShardBytes: 4 });
      expect(await readdir(join(root, 'sub'))).toEqual([]);
    });
  });

  it('resumeShardedModelWrite refuses (INDEX_SHARD_OUTSIDE) a record whose old shard now lies outside, changing nothing', async () => {
    await withTempDir(async (dir) => {
      const { root, outsideFile, linkSubOutside } = await makeOldModel(dir);
      // Stopped for good at its first commit step (record written, nothing removed yet), as after a kill -9.
      let stopped!: () => void;
      const reached = new Promise<void>((done) => (stopped = done));
      setCommitStepObserver(() => {
        stopped();
        return new Promise<void>(() => undefined);
      });
      const writer = await createShardedModelWriter(root, tensors(2), { maxShardBytes: 4 });
      await writer.write(new Uint8Array(8).fill(2));
      void writer.close();
      await reached;
      setCommitStepObserver(undefined);
      await linkSubOutside();
      // writerStopped breaks the stopped writer's lock; nothing else changes.
      const withoutLock = (names: string[]) => names.filter((name) => !name.endsWith('.commit.lock')).sort();
      const before = withoutLock(await readdir(root));
      const error = await catchErrorAsync(() => resumeShardedModelWrite(root, { writerStopped: true }));
      expectCode(error, 'INDEX_SHARD_OUTSIDE');
      expect(error.file).toBe(join(root, '.model.safetensors.index.json.commit'));
      await access(outsideFile);
      expect(withoutLock(await readdir(root))).toEqual(before);
    });
  });
});
