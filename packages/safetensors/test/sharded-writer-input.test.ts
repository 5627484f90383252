import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSafetensorsModel, writeShardedModel, type SafetensorsErrorCode, type ShardedModelOptions, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const ok = (name: unknown): TensorToWrite => ({ name: name as string, dtype: 'U8', shape: [2], data: new Uint8Array(2) });

describe('sharded writer input', () => {
  it('checks every shard header and the index up front: nothing is written, not even the directory', async () => {
    await withTempDir(async (dir) => {
      const cases: [TensorToWrite[], Partial<ShardedModelOptions>, SafetensorsErrorCode][] = [
        [[ok('a'), ok('__metadata__')], {}, 'WRITE_INVALID_TENSOR'],
        [[ok('a'), ok(5)], {}, 'WRITE_INVALID_TENSOR'],
        [[ok('a'), ok('b')], { shardMetadata: { k: 1 } as never }, 'WRITE_INVALID_TENSOR'],
        [[ok('a')], { indexMetadata: { x: undefined } }, 'INVALID_ARGUMENT'],
        [[ok('a')], { indexMetadata: { x: () => 1 } }, 'INVALID_ARGUMENT'],
        [[ok('a')], { indexMetadata: { x: 1n } }, 'INVALID_ARGUMENT'],
        [[ok('a')], { indexMetadata: 'pt' as never }, 'INVALID_ARGUMENT'],
      ];
      for (const [i, [tensors, options, code]] of cases.entries()) {
        const root = join(dir, `m${i}`);
        expectCode(await catchErrorAsync(() => writeShardedModel(root, tensors, { maxShardBytes: 2, ...options })), code);
        expect(existsSync(root), `case ${i}`).toBe(false);
      }
      // JSON data is written as given, and the reader accepts it.
      const root = join(dir, 'good');
      const { indexPath } = await writeShardedModel(root, [ok('a')], { maxShardBytes: 2, indexMetadata: { x: [1, 'y'], n: null } });
      expect(JSON.parse(await readFile(indexPath, 'utf8')).metadata).toEqual({ x: [1, 'y'], n: null, total_size: 2 });
      await (await openSafetensorsModel(root)).close();
      expect(await readdir(root)).toHaveLength(2);
    });
  });

  it('shardNamePrefix and indexFileName are one plain file name: nothing is written outside the directory', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'sub', 'm');
      const bad: Partial<ShardedModelOptions>[] = [
        { shardNamePrefix: '../esc' },
        { shardNamePrefix: 'a/b' },
        { shardNamePrefix: '' },
        { shardNamePrefix: '..' },
        { shardNamePrefix: 'a\\b' },
        { shardNamePrefix: 5 as never },
        { indexFileName: '../idx.json' },
        { indexFileName: '/tmp/idx.json' },
        { indexFileName: '.' },
        { indexFileName: '' },
      ];
      for (const options of bad) {
        const error = await catchErrorAsync(() => writeShardedModel(root, [ok('a')], { maxShardBytes: 2, ...options }));
        expectCode(error, 'INVALID_ARGUMENT');
        expect(error.message).toMatch(/shardNamePrefix|indexFileName/);
      }
      expect(existsSync(join(dir, 'sub'))).toBe(false);
      expect(await readdir(dir)).toEqual([]);
      const { indexPath, shardPaths } = await writeShardedModel(root, [ok('a')], { maxShardBytes: 2, shardNamePrefix: 'w.v2', indexFileName: 'w.safetensors.index.json' });
      expect([indexPath, ...shardPaths]).toEqual([join(root, 'w.safetensors.index.json'), join(root, 'w.v2-00001-of-00001.safetensors')]);
    });
  });
});
