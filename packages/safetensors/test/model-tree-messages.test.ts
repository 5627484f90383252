import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSafetensorsModel, parseSafetensorsBytes, writeSafetensorsFile, writeShardedModel, type ByteSource, type TensorToWrite } from '../src/index.js';
import { buildRawFile, catchError, catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'BF16', shape: [4], data: new Uint8Array(8).fill(1) },
  { name: 'b', dtype: 'F32', shape: [2], data: new Uint8Array(8).fill(2) },
];

describe('files that are not safetensors (hub downloads gone wrong)', () => {
  it('a Git LFS pointer saved as model.safetensors: HEADER_TOO_LARGE says it is text and to run git lfs pull', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeFile(path, `version https://git-lfs.github.com/spec/v1\noid sha256:${'ab'.repeat(32)}\nsize 12345\n`);
      const error = await catchErrorAsync(() => openSafetensorsModel(path));
      expectCode(error, 'HEADER_TOO_LARGE');
      expect(error.message).toContain('looks like a Git LFS pointer');
      expect(error.message).toContain('git lfs pull');
    });
  });

  it('an HTML page saved as model.safetensors: HEADER_TOO_LARGE says to download it again', () => {
    const bytes = new TextEncoder().encode('<!DOCTYPE html>\n<html><body>Access denied</body></html>\n');
    const error = catchError(() => parseSafetensorsBytes(bytes, 'model.safetensors'));
    expectCode(error, 'HEADER_TOO_LARGE');
    expect(error.message).toContain('HTML or error page');
    expect(error.message).toContain('download it again');
  });

  it('a binary length over the limit says nothing of text', () => {
    const error = catchError(() => parseSafetensorsBytes(buildRawFile('{}', undefined, 0xffffffffffffffffn), 'x.safetensors'));
    expectCode(error, 'HEADER_TOO_LARGE');
    expect(error.message).not.toContain('text');
  });

  it('a file cut short (an interrupted download): DATA_OUT_OF_BOUNDS says it looks truncated', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'model.safetensors');
      await writeSafetensorsFile(path, tensors);
      const bytes = await readFile(path);
      await writeFile(path, bytes.subarray(0, bytes.length - 5));
      const error = await catchErrorAsync(() => openSafetensorsModel(path));
      expectCode(error, 'DATA_OUT_OF_BOUNDS');
      expect(error.message).toContain('looks truncated');
    });
  });
});

describe('directories that hold several models', () => {
  it('a diffusers pipeline root (model_index.json, a model per subdirectory): NOT_SAFETENSORS names the subdirectories to open', async () => {
    await withTempDir(async (dir) => {
      await writeFile(join(dir, 'model_index.json'), '{"_class_name": "StableDiffusionPipeline"}');
      await writeShardedModel(join(dir, 'unet'), tensors, { maxShardBytes: 8, shardNamePrefix: 'diffusion_pytorch_model', indexFileName: 'diffusion_pytorch_model.safetensors.index.json' });
      await mkdir(join(dir, 'text_encoder'));
      await writeSafetensorsFile(join(dir, 'text_encoder', 'model.safetensors'), tensors);
      await mkdir(join(dir, 'scheduler'));
      await writeFile(join(dir, 'scheduler', 'scheduler_config.json'), '{}');
      const error = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(error, 'NOT_SAFETENSORS');
      expect(error.message).toContain('model_index.json');
      expect(error.message).toContain('"text_encoder/", "unet/" hold models: open (or build) each one by its own path');
      expect(error.message).not.toContain('scheduler');
      // Each component opens by its own path.
      const unet = await openSafetensorsModel(join(dir, 'unet'));
      expect(unet.tensors.map((t) => t.name)).toEqual(['a', 'b']);
      await unet.close();
    });
  });

  it('a folder of many models lists a bounded number of them, then "and N more"', async () => {
    await withTempDir(async (dir) => {
      for (let i = 0; i < 11; i += 1) {
        await mkdir(join(dir, `m${String(i).padStart(2, '0')}`));
        await writeSafetensorsFile(join(dir, `m${String(i).padStart(2, '0')}`, 'model.safetensors'), tensors);
      }
      const error = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(error, 'NOT_SAFETENSORS');
      expect(error.message).toContain('"m07/" and 3 more hold models');
      expect(error.message).not.toContain('m08');
      expect(error.message).not.toContain('model_index.json');
    });
  });

  it('a source whose objects are a pipeline: NOT_SAFETENSORS names its subdirectories', async () => {
    const source: ByteSource = {
      url: 's3://bucket/sd/',
      list: () => Promise.resolve(['model_index.json', 'unet/diffusion_pytorch_model.safetensors', 'vae/config.json', 'text_encoder/model.safetensors.index.json']),
      open: () => Promise.resolve(undefined),
    };
    const error = await catchErrorAsync(() => openSafetensorsModel({ source }));
    expectCode(error, 'NOT_SAFETENSORS');
    expect(error.message).toContain('"text_encoder/", "unet/" hold models');
  });

  it('variants side by side (x, x.fp16, a bf16 set with its variant index): DUPLICATE_TENSOR_NAME names each candidate; each opens by its path', async () => {
    await withTempDir(async (dir) => {
      const prefix = 'diffusion_pytorch_model';
      const variantIndex = join(dir, `${prefix}.safetensors.index.bf16.json`);
      await writeShardedModel(dir, tensors, { maxShardBytes: 8, shardNamePrefix: `${prefix}.bf16`, indexFileName: `${prefix}.safetensors.index.bf16.json` });
      await writeSafetensorsFile(join(dir, `${prefix}.safetensors`), tensors);
      await writeSafetensorsFile(join(dir, `${prefix}.fp16.safetensors`), tensors);
      const error = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(error, 'DUPLICATE_TENSOR_NAME');
      expect(error.message).toContain(
        `several models side by side (variants such as fp16, or copies: not one model): "${prefix}.fp16.safetensors", "${prefix}.safetensors", "${prefix}.safetensors.index.bf16.json": pass one of these files as the path`,
      );
      for (const path of [variantIndex, join(dir, `${prefix}.fp16.safetensors`)]) {
        const model = await openSafetensorsModel(path);
        expect(model.tensors.map((t) => t.name)).toEqual(['a', 'b']);
        if (path === variantIndex) expect(model.shards.map((s) => s.name)).toEqual([`${prefix}.bf16-00001-of-00002.safetensors`, `${prefix}.bf16-00002-of-00002.safetensors`]);
        await model.close();
      }
    });
  });

  it('two numbered sets without index: DUPLICATE_TENSOR_NAME says to move a set into a directory of its own', async () => {
    await withTempDir(async (dir) => {
      await writeShardedModel(join(dir, 'a'), tensors, { maxShardBytes: 8, shardNamePrefix: 'model' });
      await writeShardedModel(join(dir, 'b'), tensors, { maxShardBytes: 8, shardNamePrefix: 'model.fp16' });
      const both = join(dir, 'both');
      await mkdir(both);
      for (const [from, name] of [['a', 'model-00001-of-00002'], ['a', 'model-00002-of-00002'], ['b', 'model.fp16-00001-of-00002'], ['b', 'model.fp16-00002-of-00002']] as const) {
        await writeFile(join(both, `${name}.safetensors`), await readFile(join(dir, from, `${name}.safetensors`)));
      }
      const error = await catchErrorAsync(() => openSafetensorsModel(both));
      expectCode(error, 'DUPLICATE_TENSOR_NAME');
      expect(error.message).toContain('the numbered sets "model-NNNNN-of-MMMMM.safetensors", "model.fp16-NNNNN-of-MMMMM.safetensors" (no index: move a set into a directory of its own)');
    });
  });
});

describe('an index that omits a tensor its shard holds', () => {
  it('INDEX_TENSOR_UNLISTED (rule 22, kept) says what to do', async () => {
    await withTempDir(async (dir) => {
      // One shard holding a and b; the index keeps naming the shard (through a).
      const { indexPath } = await writeShardedModel(dir, tensors, { maxShardBytes: 16 });
      const index = JSON.parse(await readFile(indexPath, 'utf8')) as { weight_map: Record<string, string> };
      delete index.weight_map.b;
      await writeFile(indexPath, JSON.stringify(index));
      const error = await catchErrorAsync(() => openSafetensorsModel(dir));
      expectCode(error, 'INDEX_TENSOR_UNLISTED');
      expect(error.tensor).toBe('b');
      expect(error.message).toContain('download the index and its shards again from one revision');
      expect(error.message).toContain('list the tensor in weight_map under model-00001-of-00001.safetensors');
    });
  });
});
