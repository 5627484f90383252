// Places where one call refused what another took silently, or said it in other words.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SAFETENSORS_DTYPES } from '@splitzip/safetensors';
import { describe, expect, it } from 'vitest';
import { MAX_SLICE_KEYS_PER_ENTRY, openCacheStore } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, toInput } from './helpers.js';

describe('lookups refuse what aliasSlices refuses', () => {
  it('getEntry(5) and lookupBySlice with NaN or a negative offset are INVALID_ARGUMENT (they were misses); valid misses stay undefined', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([64], 1);
    await store.addEntries([toInput(tensor, 'a', [['s', 0, 128]])]);
    expect((await catchError(() => store.getEntry(5 as never))).code).toBe('INVALID_ARGUMENT');
    for (const [shard, offset, size] of [['s', Number.NaN, 128], ['s', -1, 128], ['s', 1.5, 128], ['', 0, 128], [7, 0, 128]] as const) {
      expect((await catchError(() => store.lookupBySlice(shard as never, offset, size))).code).toBe('INVALID_ARGUMENT');
      expect((await catchError(() => store.lookupSliceBinding(shard as never, offset, size))).code).toBe('INVALID_ARGUMENT');
    }
    expect(store.getEntry('')).toBeUndefined();
    expect(store.getEntry('f'.repeat(40))).toBeUndefined();
    expect(store.lookupBySlice('s', 128, 128)).toBeUndefined();
    expect(store.lookupBySlice('s', 0, 128)?.key).toBe(tensor.key);
    await store.close();
  });
});

describe('lookup by a dtype name', () => {
  it("a string that is no dtype ('bf16', 'bfloat16', 'nonsense') is UNKNOWN_DTYPE, in lookup and an alias by tensor (it read as a miss); every other safetensors dtype (F4, F6_E2M3, F6_E3M2 too) and known torch text stays a miss", async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([64], 1);
    await store.addEntries([toInput(tensor, 'a')]);
    for (const dtype of ['bf16', 'bfloat16', 'nonsense', 'torch.bf16', '']) {
      const error = await catchError(() => store.lookup(tensor.bytes, tensor.shape, dtype));
      expect(error.code).toBe('UNKNOWN_DTYPE');
      expect(error.message).toContain(JSON.stringify(dtype));
      const aliasError = await catchError(() => store.aliasSlices([{ key: { bytes: tensor.bytes, shape: tensor.shape, dtype }, shardName: 's', offsetBytes: 0, sizeBytes: 128 }]));
      expect(aliasError.code).toBe('UNKNOWN_DTYPE');
    }
    // Every safetensors dtype is a miss, the sub-byte ones (F4, F6_*: no torch text in the content
    // key's table) too: an MXFP4 model's loader looks each of its tensors up.
    for (const dtype of [...SAFETENSORS_DTYPES.filter((d) => d !== 'BF16'), 'torch.float32', 'torch.float16']) {
      expect(store.lookup(tensor.bytes, tensor.shape, dtype), dtype).toBeUndefined();
      expect(store.lookup(tensor.bytes, [128], dtype), dtype).toBeUndefined();
      expect(await store.aliasSlices([{ key: { bytes: tensor.bytes, shape: [128], dtype }, shardName: 's', offsetBytes: 0, sizeBytes: 128 }]), dtype).toEqual([false]);
    }
    expect(SAFETENSORS_DTYPES).toEqual(expect.arrayContaining(['F4', 'F6_E2M3', 'F6_E3M2']));
    expect(store.lookup(tensor.bytes, tensor.shape, 'BF16')?.key).toBe(tensor.key);
    expect(store.lookup(tensor.bytes, tensor.shape, 'torch.bfloat16')?.key).toBe(tensor.key);
    await store.close();
  });
});

describe('one code for one limit', () => {
  it('an add with more than MAX_SLICE_KEYS_PER_ENTRY slice keys is SIZE_INVALID, as an alias past it is', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([8], 2);
    const sliceKeys = Array.from({ length: MAX_SLICE_KEYS_PER_ENTRY + 1 }, (_, i) => ['s', i * 16, 16] as [string, number, number]);
    const error = await catchError(() => store.addEntries([toInput(tensor, 'a', sliceKeys)]));
    expect(error.code).toBe('SIZE_INVALID');
    expect(error.details).toMatchObject({ limit: MAX_SLICE_KEYS_PER_ENTRY });
    await store.close();
  });
});

describe('a cache path that is a file', () => {
  it("openCacheStore('<cache>/manifest.json') says to pass the cache directory, naming the path given", async () => {
    const root = await makeTempDir();
    await (await openCacheStore(root, { create: true })).close();
    const error = await catchError(() => openCacheStore(join(root, 'manifest.json')));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain('pass the cache directory');
    expect(error.message).not.toContain('manifest.json/manifest.json');
    expect(error.path).toBe(join(root, 'manifest.json'));
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    const other = await catchError(() => openCacheStore(file));
    expect(other.message).toContain('the cache path is a file, not a directory');
    expect(other.path).toBe(file);
  });
});
