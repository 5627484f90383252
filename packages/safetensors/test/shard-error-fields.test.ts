import { mkdir, readFile, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSafetensorsModel, writeSafetensorsFile, writeShardedModel, type ByteSource, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

// INDEX_SHARD_MISSING and INDEX_SHARD_OUTSIDE named the shard only in the message: a loader could
// not read it (nor the tensor that needed it) from a field.
const tensors: TensorToWrite[] = ['a', 'b', 'c'].map((name, i) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(i + 1) }));
const SHARD_2 = 'model-00002-of-00003.safetensors';

describe('shard errors carry the shard name (and the tensor the index maps to it) in fields', () => {
  it('INDEX_SHARD_MISSING from a directory: shard and tensor', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      const { indexPath } = await writeShardedModel(root, tensors, { maxShardBytes: 4 });
      await unlink(join(root, SHARD_2));
      const error = await catchErrorAsync(() => openSafetensorsModel(indexPath));
      expectCode(error, 'INDEX_SHARD_MISSING');
      expect(error.shard).toBe(SHARD_2);
      expect(error.tensor).toBe('b');
      expect(error.file).toBe(indexPath);
    });
  });

  it('INDEX_SHARD_MISSING from a ByteSource: shard and tensor', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      const { indexPath } = await writeShardedModel(root, tensors, { maxShardBytes: 4 });
      const index = await readFile(indexPath);
      const source: ByteSource = {
        url: 'mem://m/',
        list: async () => ['model.safetensors.index.json'],
        open: async (name) =>
          name === 'model.safetensors.index.json'
            ? { sizeBytes: index.length, readInto: async (position: number, target: Uint8Array) => void target.set(index.subarray(position, position + target.length)) }
            : undefined,
      };
      const error = await catchErrorAsync(() => openSafetensorsModel({ source }));
      expectCode(error, 'INDEX_SHARD_MISSING');
      expect(error.shard).toBe('model-00001-of-00003.safetensors');
      expect(error.tensor).toBe('a');
    });
  });

  it('INDEX_SHARD_OUTSIDE, from the reader and from a writer refusing to remove an old shard: shard', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await mkdir(join(dir, 'outside'), { recursive: true });
      await writeSafetensorsFile(join(dir, 'outside', 'x.safetensors'), tensors);
      await mkdir(root);
      await symlink(join(dir, 'outside'), join(root, 'sub'));
      const indexPath = join(root, 'model.safetensors.index.json');
      await writeFile(indexPath, JSON.stringify({ metadata: {}, weight_map: { a: 'sub/x.safetensors', b: 'sub/x.safetensors', c: 'sub/x.safetensors' } }));
      const read = await catchErrorAsync(() => openSafetensorsModel(indexPath));
      expectCode(read, 'INDEX_SHARD_OUTSIDE');
      expect(read.shard).toBe('sub/x.safetensors');
      expect(read.tensor).toBe('a');
      const write = await catchErrorAsync(() => writeShardedModel(root, tensors, { maxShardBytes: 4 }));
      expectCode(write, 'INDEX_SHARD_OUTSIDE');
      expect(write.shard).toBe('sub/x.safetensors');
      expect(write.file).toBe(indexPath);
    });
  });
});
