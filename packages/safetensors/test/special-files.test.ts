import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openSafetensorsModel, readTensorBytes, writeSafetensorsFile, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, makeFifo, settlesWithin, unblockFifos, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) },
  { name: 'b', dtype: 'F32', shape: [2], data: new Uint8Array(8).fill(2) },
];
const INDEX = 'model.safetensors.index.json';

afterEach(async () => {
  vi.restoreAllMocks();
  await unblockFifos();
});

describe.skipIf(process.platform === 'win32')('an index or shard that is not a regular file', () => {
  it('a model directory whose index is a FIFO: NOT_SAFETENSORS at once, naming the index (it blocked forever)', async () => {
    await withTempDir(async (dir) => {
      await writeSafetensorsFile(join(dir, 'model.safetensors'), tensors);
      makeFifo(join(dir, INDEX));
      // Four at once: as many as libuv's thread pool has, which four blocked opens used to stall.
      const errors = await Promise.all([1, 2, 3, 4].map(() => settlesWithin(catchErrorAsync(() => openSafetensorsModel(dir)))));
      for (const error of errors) {
        expectCode(error, 'NOT_SAFETENSORS');
        expect(error.file).toBe(join(dir, INDEX));
        expect(error.message).toContain('a FIFO');
      }
    });
  });

  it('a model directory whose index is a directory: NOT_SAFETENSORS naming the index (it was a raw EISDIR)', async () => {
    await withTempDir(async (dir) => {
      await writeSafetensorsFile(join(dir, 'model.safetensors'), tensors);
      await mkdir(join(dir, INDEX));
      const error = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(error, 'NOT_SAFETENSORS');
      expect(error.file).toBe(join(dir, INDEX));
      expect(error.message).toContain('a directory');
    });
  });

  it('a shard that is a FIFO: INDEX_SHARD_MISSING for an index, NOT_SAFETENSORS in a directory', async () => {
    await withTempDir(async (dir) => {
      const { indexPath, shardPaths } = await writeShardedModel(join(dir, 'm'), tensors, { maxShardBytes: 8 });
      await rename(shardPaths[1]!, `${shardPaths[1]!}.moved`);
      makeFifo(shardPaths[1]!);
      const indexed = await settlesWithin(catchErrorAsync(() => openSafetensorsModel(indexPath)));
      expectCode(indexed, 'INDEX_SHARD_MISSING');
      expect(indexed.file).toBe(indexPath);
      const plain = join(dir, 'plain');
      await mkdir(plain);
      makeFifo(join(plain, 'x.safetensors'));
      expectCode(await settlesWithin(catchErrorAsync(() => openSafetensorsModel(plain))), 'NOT_SAFETENSORS');
    });
  });

  it('a failed read is IO_ERROR naming the file, tensor and position (it was the raw errno error)', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'm.safetensors');
      await writeSafetensorsFile(path, tensors);
      const model = await openSafetensorsModel(path);
      try {
        const probe = await open(path, 'r');
        const prototype = Object.getPrototypeOf(probe) as { read: (...args: unknown[]) => Promise<unknown> };
        await probe.close();
        vi.spyOn(prototype, 'read').mockRejectedValue(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' }));
        const error = await catchErrorAsync(() => readTensorBytes(model, 'b'));
        expectCode(error, 'IO_ERROR');
        expect(error.file).toBe(path);
        expect(error.tensor).toBe('b');
        expect(error.offsets?.position).toBe(model.getTensor('b')!.slice.offsetBytes);
        expect(error.message).toContain('EIO');
      } finally {
        await model.close();
      }
    });
  });
});
