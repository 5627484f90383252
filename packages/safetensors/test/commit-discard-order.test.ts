import type * as FsPromises from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { writeShardedModel, type TensorToWrite } from '../src/index.js';
import { withTempDir } from './helpers.js';

/** Every unlink of the package, by file name, in order. */
const unlinked: string[] = [];
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof FsPromises>();
  return {
    ...fs,
    unlink: async (path: Parameters<typeof fs.unlink>[0]) => {
      unlinked.push(basename(String(path)));
      return fs.unlink(path);
    },
  };
});

const tensors = (fill: number): TensorToWrite[] => ['a', 'b', 'c'].map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

afterEach(() => setCommitStepObserver(undefined));

describe('a commit that fails before its first old file goes', () => {
  it('removes its commit record before any staged temp: a kill in between never leaves a record whose temps are partly gone', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      setCommitStepObserver((step) => {
        if (step.startsWith('remove-shard ')) throw Object.assign(new Error('EIO (simulated)'), { code: 'EIO' });
      });
      unlinked.length = 0;
      await expect(writeShardedModel(root, tensors(2), { maxShardBytes: 4 })).rejects.toThrow('EIO (simulated)');
      const record = unlinked.indexOf('.model.safetensors.index.json.commit');
      const temps = unlinked.flatMap((name, i) => (/^\.model-\d{5}-of-\d{5}\.safetensors\.tmp-/.test(name) ? [i] : []));
      expect(record).toBeGreaterThanOrEqual(0);
      expect(temps).toHaveLength(3);
      expect(Math.min(...temps)).toBeGreaterThan(record);
    });
  });
});
