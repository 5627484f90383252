import type * as FsPromises from 'node:fs/promises';
import { readFile, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { resumeShardedModelWrite, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

/** Every unlink of the package, by file name, in order. */
const unlinked: string[] = [];
/** A file name whose unlink fails (EIO). */
let failUnlinkOf: string | undefined;
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof FsPromises>();
  return {
    ...fs,
    unlink: async (path: Parameters<typeof fs.unlink>[0]) => {
      unlinked.push(basename(String(path)));
      if (basename(String(path)) === failUnlinkOf) throw Object.assign(new Error('EIO (simulated unlink)'), { code: 'EIO' });
      return fs.unlink(path);
    },
  };
});

const tensors = (fill: number): TensorToWrite[] => ['a', 'b', 'c'].map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

afterEach(() => {
  setCommitStepObserver(undefined);
  failUnlinkOf = undefined;
});

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

  it('keeps its staged temps where its record cannot be removed (it names them): IO_ERROR names the record', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      setCommitStepObserver((step) => {
        if (step.startsWith('remove-shard ')) throw Object.assign(new Error('EIO (simulated)'), { code: 'EIO' });
      });
      failUnlinkOf = '.model.safetensors.index.json.commit';
      const error = await catchErrorAsync(() => writeShardedModel(root, tensors(2), { maxShardBytes: 4 }));
      failUnlinkOf = undefined;
      expectCode(error, 'IO_ERROR');
      expect(error.message).toContain('.model.safetensors.index.json.commit');
      // Why the write failed stays the cause (the record's unlink error is named in the message).
      const causes: string[] = [];
      for (let at: unknown = (error as { cause?: unknown }).cause; at instanceof Error; at = (at as { cause?: unknown }).cause) causes.push(at.message);
      expect(causes.join(' | ')).toContain('EIO (simulated)');
      expect(error.message).toMatch(/the write failed: .*; and file system error \w+ removing its commit record/);
      const record = JSON.parse(await readFile(join(root, '.model.safetensors.index.json.commit'), 'utf8')) as { shards: { staged: string }[] };
      const left = await readdir(root);
      for (const shard of record.shards) expect(left).toContain(shard.staged);
      // The record and its temps finish the write.
      await resumeShardedModelWrite(root);
    });
  });
});
