import type * as fs from 'node:fs';
import type { BigIntStats } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openSafetensorsModel, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

// A writer replacing the model between two of the reader's shard opens: the hook runs once, at
// the open of a path ending in `trigger`, before that open.
let trigger: string | undefined;
let hook: (() => Promise<void>) | undefined;
// What a bigint stat() by path reports, changed (an overlayfs device number, a size).
let alterStat: ((path: string, stats: BigIntStats) => BigIntStats) | undefined;
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof fsPromises>();
  return {
    ...actual,
    open: async (path: string, ...rest: unknown[]) => {
      if (trigger !== undefined && hook !== undefined && String(path).endsWith(trigger)) {
        const run = hook;
        hook = undefined;
        await run();
      }
      return (actual.open as (...args: unknown[]) => Promise<unknown>)(path, ...rest);
    },
    stat: async (path: string, ...rest: unknown[]) => {
      const stats = await (actual.stat as (...args: unknown[]) => Promise<unknown>)(path, ...rest);
      return alterStat !== undefined && typeof (stats as { dev?: unknown }).dev === 'bigint' ? alterStat(String(path), stats as BigIntStats) : stats;
    },
  };
});
// The final in-place check stats synchronously.
vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof fs>();
  return {
    ...actual,
    statSync: (path: string, ...rest: unknown[]) => {
      const stats = (actual.statSync as (...args: unknown[]) => unknown)(path, ...rest);
      return alterStat !== undefined && typeof (stats as { dev?: unknown } | undefined)?.dev === 'bigint' ? alterStat(String(path), stats as BigIntStats) : stats;
    },
  };
});
afterEach(() => {
  trigger = undefined;
  hook = undefined;
  alterStat = undefined;
});

const tensors = (fill: number): TensorToWrite[] => ['a', 'b'].map((name) => ({ name, dtype: 'U8', shape: [4], data: new Uint8Array(4).fill(fill) }));

describe('a model replaced while it is being opened', () => {
  it('is refused (SHARD_CHANGED), not opened as a mix of old and new shards: with an index and without', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      trigger = 'model-00002-of-00002.safetensors';
      hook = async () => void (await writeShardedModel(root, tensors(2), { maxShardBytes: 4 }));
      const indexed = await catchErrorAsync(() => openSafetensorsModel(root));
      expectCode(indexed, 'SHARD_CHANGED');
      expect(hook).toBeUndefined();

      const bare = join(dir, 'bare');
      await writeShardedModel(bare, tensors(1), { maxShardBytes: 4 });
      await fsPromises.rm(join(bare, 'model.safetensors.index.json'));
      hook = async () => {
        await writeShardedModel(bare, tensors(2), { maxShardBytes: 4 });
        await fsPromises.rm(join(bare, 'model.safetensors.index.json'));
      };
      expectCode(await catchErrorAsync(() => openSafetensorsModel(bare)), 'SHARD_CHANGED');
      // Once the writer is done, the new model opens.
      for (const path of [root, bare]) {
        const model = await openSafetensorsModel(path);
        expect(model.tensors.map((t) => t.name)).toEqual(['a', 'b']);
        await model.close();
      }
    });
  });

  it('the final check compares what the file stamp does (inode, size, mtime; no device): another device number from stat is the same file', async () => {
    await withTempDir(async (dir) => {
      const root = join(dir, 'm');
      await writeShardedModel(root, tensors(1), { maxShardBytes: 4 });
      // overlayfs and old kernels report another device for stat(path) than for fstat: not a change.
      alterStat = (_path, stats) => Object.assign(Object.create(Object.getPrototypeOf(stats) as object) as BigIntStats, stats, { dev: stats.dev + 1n });
      const model = await openSafetensorsModel(root);
      expect(model.tensors.map((t) => t.name)).toEqual(['a', 'b']);
      await model.close();
      // A shard whose size moved between its open and the check (rewritten in place) is a change.
      alterStat = (path, stats) =>
        path.endsWith('model-00002-of-00002.safetensors') ? Object.assign(Object.create(Object.getPrototypeOf(stats) as object) as BigIntStats, stats, { size: stats.size + 1n }) : stats;
      const resized = await catchErrorAsync(() => openSafetensorsModel(root));
      expectCode(resized, 'SHARD_CHANGED');
      expect(resized.message).toContain('model-00002-of-00002.safetensors');
    });
  });
});
