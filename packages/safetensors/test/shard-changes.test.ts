import { open, readFile, rename, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { STAMP_CHECK_INTERVAL_MS, iterateTensors, openSafetensorsModel, readShardStamp, readTensorBytes, writeSafetensorsFile } from '../src/index.js';
import { catchErrorAsync, createRandom, expectCode, randomBytes, withTempDir } from './helpers.js';

async function writeModel(path: string, seed: number) {
  const random = createRandom(seed);
  const tensors = [
    { name: 'a', dtype: 'BF16' as const, shape: [64], data: randomBytes(random, 128) },
    { name: 'b', dtype: 'U8' as const, shape: [5], data: randomBytes(random, 5) },
  ];
  await writeSafetensorsFile(path, tensors);
  return tensors;
}

describe('a shard file that changes under an open model', () => {
  it('rewritten in place: reads throw SHARD_CHANGED naming the file and tensor, and readShardStamp tells', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 1);
      const model = await openSafetensorsModel(path);
      try {
        const shard = model.shards[0]!;
        expect(readShardStamp(model, shard.name)).toBe(shard.stamp);
        expect(await readTensorBytes(model, 'a')).toEqual(before[0]!.data);
        // Same layout, other bytes, written through the same inode (as `cp` over it or an editor does).
        const after = await writeModel(join(dir, 'next.safetensors'), 2);
        const handle = await open(path, 'r+');
        await handle.write(await readFile(join(dir, 'next.safetensors')), 0);
        await handle.close();
        await utimes(path, new Date(), new Date(Date.now() + 5_000));
        await sleep(STAMP_CHECK_INTERVAL_MS + 5); // a read checks once the last check is that old
        expect(readShardStamp(model, shard.name)).not.toBe(shard.stamp);
        const error = await catchErrorAsync(() => readTensorBytes(model, 'a'));
        expectCode(error, 'SHARD_CHANGED');
        expect(error.message).toContain('open the model again');
        expect(error.file).toBe(path);
        expect(error.tensor).toBe('a');
        expectCode(await catchErrorAsync(async () => {
          for await (const _ of iterateTensors(model)) void _;
        }), 'SHARD_CHANGED');
        // A new model handle reads the new file.
        const again = await openSafetensorsModel(path);
        expect(await readTensorBytes(again, 'a')).toEqual(after[0]!.data);
        await again.close();
      } finally {
        await model.close();
      }
      expect(readShardStamp(model, 'model.safetensors')).toBeNull();
    });
  });

  it('the check runs at most once per STAMP_CHECK_INTERVAL_MS per shard: the first read after that throws', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeModel(path, 5);
      const model = await openSafetensorsModel(path);
      try {
        await sleep(STAMP_CHECK_INTERVAL_MS + 5);
        await readTensorBytes(model, 'b'); // checked now
        await utimes(path, new Date(), new Date(Date.now() + 5_000));
        await sleep(STAMP_CHECK_INTERVAL_MS + 5);
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'b')), 'SHARD_CHANGED');
        // It stays refused: a failed check records nothing.
        expectCode(await catchErrorAsync(() => readTensorBytes(model, 'a')), 'SHARD_CHANGED');
      } finally {
        await model.close();
      }
    });
  });

  it('a read in flight when the model closes completes with its bytes (no stamp check on a closed file)', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const tensors = await writeModel(path, 6);
      for (let i = 0; i < 5; i++) {
        const model = await openSafetensorsModel(path);
        await sleep(STAMP_CHECK_INTERVAL_MS + 4); // so the read's check is due
        const read = readTensorBytes(model, 'a');
        await model.close();
        expect(await read).toEqual(tensors[0]!.data);
      }
    });
  });

  it('replaced by a rename: the open model keeps reading the file it opened, unchanged', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      const before = await writeModel(path, 3);
      const model = await openSafetensorsModel(path);
      try {
        await writeModel(join(dir, 'next.safetensors'), 4);
        await rename(join(dir, 'next.safetensors'), path);
        expect(readShardStamp(model, model.shards[0]!.name)).toBe(model.shards[0]!.stamp);
        expect(await readTensorBytes(model, 'a')).toEqual(before[0]!.data);
        expect(readShardStamp(model, 'no-such-shard')).toBeNull();
      } finally {
        await model.close();
      }
    });
  });
});
