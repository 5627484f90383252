import { mkdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSafetensorsModel, parseSafetensorsIndex, readTensorBytes, writeSafetensorsFile, writeShardedModel, type SafetensorsErrorCode, type TensorToWrite } from '../src/index.js';
import { catchError, catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) },
  { name: 'b', dtype: 'F32', shape: [2], data: new Uint8Array(8).fill(2) },
  { name: 'c', dtype: 'I64', shape: [1], data: new Uint8Array(8).fill(3) },
];

/** A sharded model in dir/m (3 shards) and its parsed index. */
async function makeModel(dir: string) {
  const root = join(dir, 'm');
  const { indexPath, shardPaths } = await writeShardedModel(root, tensors, { maxShardBytes: 8 });
  const index = JSON.parse(await readFile(indexPath, 'utf8')) as { metadata: Record<string, unknown>; weight_map: Record<string, string> };
  return { root, indexPath, shardPaths, index };
}

async function expectIndexError(indexPath: string, index: unknown, code: SafetensorsErrorCode, tensor?: string) {
  await writeFile(indexPath, typeof index === 'string' ? index : JSON.stringify(index));
  const error = await catchErrorAsync(() => openSafetensorsModel(indexPath));
  expectCode(error, code);
  expect(error.file).toBe(indexPath);
  if (tensor !== undefined) expect(error.tensor).toBe(tensor);
}

describe('index files', () => {
  it('opens a valid index and exposes its metadata', async () => {
    await withTempDir(async (dir) => {
      const { indexPath } = await makeModel(dir);
      const model = await openSafetensorsModel(indexPath);
      expect(model.shards).toHaveLength(3);
      expect(model.indexMetadata).toEqual({ total_size: 24 });
      await model.close();
    });
  });

  it('rejects shard names that leave the model directory: .., absolute, linked directories', async () => {
    await withTempDir(async (dir) => {
      const { root, indexPath, index } = await makeModel(dir);
      const outside = join(dir, 'outside.safetensors');
      await writeSafetensorsFile(outside, [tensors[0]!]);
      const wm = (a: string) => ({ ...index, weight_map: { ...index.weight_map, a } });
      await expectIndexError(indexPath, wm('../outside.safetensors'), 'INDEX_SHARD_TRAVERSAL', 'a');
      await expectIndexError(indexPath, wm('sub/../../outside.safetensors'), 'INDEX_SHARD_TRAVERSAL', 'a');
      await expectIndexError(indexPath, wm(outside), 'INDEX_SHARD_ABSOLUTE', 'a');
      await expectIndexError(indexPath, wm('C:/x.safetensors'), 'INDEX_SHARD_ABSOLUTE', 'a');
      await expectIndexError(indexPath, wm('..\\outside.safetensors'), 'INDEX_SHARD_INVALID_NAME', 'a');
      await expectIndexError(indexPath, wm(''), 'INDEX_SHARD_INVALID_NAME', 'a');
      await expectIndexError(indexPath, wm('./model-00001-of-00003.safetensors'), 'INDEX_SHARD_INVALID_NAME', 'a');
      // A linked directory leading outside (a linked file may: the hub cache layout, below).
      await symlink(dir, join(root, 'up'));
      await expectIndexError(indexPath, wm('up/outside.safetensors'), 'INDEX_SHARD_OUTSIDE');
      await mkdir(join(root, 'sub'));
      await symlink(dir, join(root, 'sub', 'up'));
      await expectIndexError(indexPath, wm('sub/up/outside.safetensors'), 'INDEX_SHARD_OUTSIDE');
      // A link that stays inside is fine (and the tensor is read through it).
      await symlink(join(root, 'model-00001-of-00003.safetensors'), join(root, 'inside.safetensors'));
      await writeFile(indexPath, JSON.stringify(wm('inside.safetensors')));
      const model = await openSafetensorsModel(indexPath);
      expect(model.getTensor('a')?.slice.shardName).toBe('inside.safetensors');
      await model.close();
    });
  });

  it('opens the Hugging Face hub cache layout: every snapshot file a relative link into ../../blobs', async () => {
    await withTempDir(async (dir) => {
      const written = await makeModel(join(dir, 'build'));
      const hub = join(dir, 'models--org--m');
      const snapshot = join(hub, 'snapshots', 'rev1');
      await mkdir(join(hub, 'blobs'), { recursive: true });
      await mkdir(snapshot, { recursive: true });
      const files = [written.indexPath, ...written.shardPaths];
      for (const [i, file] of files.entries()) {
        const blob = `sha${i}`;
        await rename(file, join(hub, 'blobs', blob));
        await symlink(join('..', '..', 'blobs', blob), join(snapshot, file.slice(file.lastIndexOf('/') + 1)));
      }
      const indexName = written.indexPath.slice(written.indexPath.lastIndexOf('/') + 1);
      for (const location of [snapshot, join(snapshot, indexName)]) {
        const model = await openSafetensorsModel(location);
        expect(model.shards.map((shard) => shard.name)).toEqual(written.shardPaths.map((p) => p.slice(p.lastIndexOf('/') + 1)));
        for (const tensor of tensors) expect(await readTensorBytes(model, tensor.name)).toEqual(tensor.data);
        await model.close();
      }
    });
  });

  it('rejects a missing shard, a directory as shard, and tensor lists that disagree', async () => {
    await withTempDir(async (dir) => {
      const { root, indexPath, index } = await makeModel(dir);
      await expectIndexError(indexPath, { ...index, weight_map: { ...index.weight_map, a: 'nope.safetensors' } }, 'INDEX_SHARD_MISSING');
      await mkdir(join(root, 'd.safetensors'));
      await expectIndexError(indexPath, { ...index, weight_map: { ...index.weight_map, a: 'd.safetensors' } }, 'INDEX_SHARD_MISSING');
      // weight_map names a tensor its shard does not have.
      await expectIndexError(indexPath, { ...index, weight_map: { ...index.weight_map, ghost: 'model-00001-of-00003.safetensors' } }, 'INDEX_TENSOR_MISSING', 'ghost');
      // A shard holds a tensor weight_map does not list (a shard no tensor names is simply not part of the model).
      const pair = await writeShardedModel(join(dir, 'pair'), tensors, { maxShardBytes: 16 });
      const pairIndex = JSON.parse(await readFile(pair.indexPath, 'utf8')) as { weight_map: Record<string, string> };
      const { b: _b, ...withoutB } = pairIndex.weight_map;
      await expectIndexError(pair.indexPath, { weight_map: withoutB }, 'INDEX_TENSOR_UNLISTED', 'b');
      // ... or lists under another shard.
      await expectIndexError(pair.indexPath, { weight_map: { ...pairIndex.weight_map, b: 'model-00002-of-00002.safetensors' } }, 'INDEX_TENSOR_UNLISTED', 'b');
      // Rule 22 before 23: with both broken (b unlisted, ghost missing), b is reported.
      await expectIndexError(pair.indexPath, { weight_map: { ...withoutB, ghost: 'model-00002-of-00002.safetensors' } }, 'INDEX_TENSOR_UNLISTED', 'b');
      // Moving a tensor to a shard that lacks it, the other shard dropping out: missing.
      await expectIndexError(indexPath, { ...index, weight_map: { ...index.weight_map, c: 'model-00001-of-00003.safetensors' } }, 'INDEX_TENSOR_MISSING', 'c');
    });
  });

  it('rejects malformed index JSON', async () => {
    await withTempDir(async (dir) => {
      const { indexPath, index } = await makeModel(dir);
      await expectIndexError(indexPath, '{"weight_map":', 'INDEX_INVALID_JSON');
      await expectIndexError(indexPath, '[]', 'INDEX_NOT_OBJECT');
      await expectIndexError(indexPath, '{"metadata":{}}', 'INDEX_INVALID');
      await expectIndexError(indexPath, '{"weight_map":[]}', 'INDEX_INVALID');
      await expectIndexError(indexPath, '{"weight_map":{"a":1}}', 'INDEX_INVALID', 'a');
      await expectIndexError(indexPath, { ...index, metadata: 'x' }, 'INDEX_INVALID');
      await expectIndexError(indexPath, '{"weight_map":{"a":"model-00001-of-00003.safetensors","a":"model-00002-of-00003.safetensors"}}', 'INDEX_DUPLICATE_KEY', 'a');
      await writeFile(indexPath, Uint8Array.from([0x7b, 0xff, 0x7d]));
      expectCode(await catchErrorAsync(() => openSafetensorsModel(indexPath)), 'INDEX_INVALID_UTF8');
      expectCode(catchError(() => parseSafetensorsIndex(new Uint8Array(100_000_001), 'big.json')), 'INDEX_TOO_LARGE');
    });
  });
});

describe('opening paths', () => {
  it('a missing path, an empty directory, duplicate names across shards, several indexes', async () => {
    await withTempDir(async (dir) => {
      expectCode(await catchErrorAsync(() => openSafetensorsModel(join(dir, 'none'))), 'PATH_NOT_FOUND');
      await mkdir(join(dir, 'empty'));
      expectCode(await catchErrorAsync(() => openSafetensorsModel(join(dir, 'empty'))), 'NOT_SAFETENSORS');
      await mkdir(join(dir, 'dup'));
      await writeSafetensorsFile(join(dir, 'dup', 'x.safetensors'), [tensors[0]!]);
      await writeSafetensorsFile(join(dir, 'dup', 'y.safetensors'), [tensors[0]!]);
      const dup = await catchErrorAsync(() => openSafetensorsModel(join(dir, 'dup')));
      expectCode(dup, 'DUPLICATE_TENSOR_NAME');
      expect(dup.tensor).toBe('a');
      const { root, indexPath } = await makeModel(dir);
      await writeFile(join(root, 'other.safetensors.index.json'), await readFile(indexPath));
      const model = await openSafetensorsModel(root); // model.safetensors.index.json is preferred
      expect(model.indexPath).toBe(indexPath);
      await model.close();
      await rename(indexPath, join(root, 'third.safetensors.index.json'));
      expectCode(await catchErrorAsync(() => openSafetensorsModel(root)), 'NOT_SAFETENSORS');
    });
  });

  it('a broken shard in a directory fails the whole open with that shard named', async () => {
    await withTempDir(async (dir) => {
      const { shardPaths, indexPath } = await makeModel(dir);
      const bytes = new Uint8Array(await readFile(shardPaths[1]!));
      await writeFile(shardPaths[1]!, bytes.subarray(0, bytes.length - 1));
      const error = await catchErrorAsync(() => openSafetensorsModel(indexPath));
      expectCode(error, 'DATA_OUT_OF_BOUNDS');
      expect(error.file).toBe(shardPaths[1]);
      expect(error.tensor).toBe('b');
    });
  });
});
