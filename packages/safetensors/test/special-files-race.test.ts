import * as fsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openSafetensorsModel, writeSafetensorsFile, writeShardedModel, type TensorToWrite } from '../src/index.js';
import { catchErrorAsync, expectCode, makeFifo, settlesWithin, unblockFifos, withTempDir } from './helpers.js';

// The opener stat()s each shard by path before opening it; a FIFO swapped in between those two
// calls must still be caught (by fstat of what was opened), not block the open. The swap is
// simulated: stat() of a path ending in SWAPPED answers for a regular file.
const SWAPPED = 'swapped.safetensors';
let regularFile = '';
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof fsPromises>();
  return {
    ...actual,
    stat: (path: string, ...rest: unknown[]) => (String(path).endsWith(SWAPPED) ? actual.stat(regularFile) : (actual.stat as (...args: unknown[]) => unknown)(path, ...rest)),
  };
});

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) },
  { name: 'b', dtype: 'F32', shape: [2], data: new Uint8Array(8).fill(2) },
];
afterEach(async () => {
  await unblockFifos();
});

describe.skipIf(process.platform === 'win32')('a shard replaced by a FIFO after its stat', () => {
  it('is refused by fstat of the opened descriptor: INDEX_SHARD_MISSING (index), NOT_SAFETENSORS (directory)', async () => {
    await withTempDir(async (dir) => {
      regularFile = join(dir, 'regular.safetensors');
      await writeSafetensorsFile(regularFile, tensors);
      const root = join(dir, 'm');
      const { indexPath } = await writeShardedModel(root, tensors, { maxShardBytes: 8 });
      const index = JSON.parse(await fsPromises.readFile(indexPath, 'utf8')) as { weight_map: Record<string, string> };
      index.weight_map.b = SWAPPED;
      await fsPromises.writeFile(indexPath, JSON.stringify(index));
      makeFifo(join(root, SWAPPED));
      const indexed = await settlesWithin(catchErrorAsync(() => openSafetensorsModel(indexPath)));
      expectCode(indexed, 'INDEX_SHARD_MISSING');
      expect(indexed.file).toBe(indexPath);
      expect(indexed.message).toContain('a FIFO');

      const plain = join(dir, 'plain');
      await fsPromises.mkdir(plain);
      makeFifo(join(plain, SWAPPED));
      const direct = await settlesWithin(catchErrorAsync(() => openSafetensorsModel(plain)));
      expectCode(direct, 'NOT_SAFETENSORS');
      expect(direct.file).toBe(join(plain, SWAPPED));
    });
  });
});
