import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSafetensorsWriter, createShardedModelWriter, openSafetensorsModel, writeSafetensorsFile, writeShardedModel, type ByteSource, type TensorToWrite } from '../src/index.js';
import { setCommitStepObserver } from '../src/create-sharded-model-writer.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const ok: TensorToWrite = { name: 'a', dtype: 'U8', shape: [2], data: new Uint8Array(2) };

describe('writers give typed errors naming the target', () => {
  it('a missing directory or a directory in the way is IO_ERROR naming the destination, with nothing left behind', async () => {
    await withTempDir(async (dir) => {
      const missing = join(dir, 'nope', 'x.safetensors');
      const noDir = await catchErrorAsync(() => writeSafetensorsFile(missing, [ok]));
      expectCode(noDir, 'IO_ERROR');
      expect(noDir.file).toBe(missing);
      expect(noDir.message).toContain('ENOENT');
      expectCode(await catchErrorAsync(() => createSafetensorsWriter(missing, [ok])), 'IO_ERROR');
      const isDir = join(dir, 'd.safetensors');
      await mkdir(isDir);
      const inTheWay = await catchErrorAsync(() => writeSafetensorsFile(isDir, [ok]));
      expectCode(inTheWay, 'IO_ERROR');
      expect(inTheWay.file).toBe(isDir);
      expect(inTheWay.message).toContain('EISDIR');
      // The sharded writer: its index path a directory, its directory a file.
      const model = join(dir, 'm');
      await mkdir(join(model, 'model.safetensors.index.json'), { recursive: true });
      const index = await catchErrorAsync(() => writeShardedModel(model, [ok], { maxShardBytes: 2 }));
      expectCode(index, 'IO_ERROR');
      await writeFile(join(dir, 'f'), 'x');
      const underFile = await catchErrorAsync(() => writeShardedModel(join(dir, 'f', 'm'), [ok], { maxShardBytes: 2 }));
      expectCode(underFile, 'IO_ERROR');
      expect(underFile.file).toBe(join(dir, 'f', 'm'));
      expect((await readdir(dir)).sort()).toEqual(['d.safetensors', 'f', 'm']);
      expect((await readdir(isDir)).filter((n) => n.includes('.tmp-'))).toEqual([]);
    });
  });

  it('a tensor list that is not an array of objects, or missing options, is a typed error', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'x.safetensors');
      for (const tensors of [null, {}, 'ab', undefined]) {
        expectCode(await catchErrorAsync(() => writeSafetensorsFile(path, tensors as never)), 'INVALID_ARGUMENT');
        expectCode(await catchErrorAsync(() => writeShardedModel(dir, tensors as never, { maxShardBytes: 2 })), 'INVALID_ARGUMENT');
        expectCode(await catchErrorAsync(() => createSafetensorsWriter(path, tensors as never)), 'INVALID_ARGUMENT');
        expectCode(await catchErrorAsync(() => createShardedModelWriter(dir, tensors as never, { maxShardBytes: 2 })), 'INVALID_ARGUMENT');
      }
      for (const tensors of [[null], [ok, 5]]) {
        const error = await catchErrorAsync(() => writeSafetensorsFile(path, tensors as never));
        expectCode(error, 'WRITE_INVALID_TENSOR');
        expect(error.message).toMatch(/tensors\[\d\]/);
      }
      expectCode(await catchErrorAsync(() => writeShardedModel(dir, [ok], undefined as never)), 'INVALID_ARGUMENT');
      expectCode(await catchErrorAsync(() => createSafetensorsWriter(path, [ok], null as never)), 'INVALID_ARGUMENT');
      expect(await readdir(dir)).toEqual([]);
    });
  });

  it('only file-system errors (a string errno code) become IO_ERROR: another error passes unchanged', async () => {
    await withTempDir(async (dir) => {
      // A programming error at a commit step (the test seam) was IO_ERROR "file system error unknown".
      setCommitStepObserver(() => {
        throw new TypeError('a bug, not the file system');
      });
      const bug: unknown = await writeShardedModel(dir, [{ name: 'a', dtype: 'U8', shape: [1], data: new Uint8Array(1) }], { maxShardBytes: 4 }).catch((error: unknown) => error);
      setCommitStepObserver(undefined);
      expect(bug).toBeInstanceOf(TypeError);
      expect((bug as TypeError).message).toBe('a bug, not the file system');
      expect(await readdir(dir)).toEqual([]);
      setCommitStepObserver(() => {
        throw Object.assign(new Error('no space (simulated)'), { code: 'ENOSPC' });
      });
      const full = await catchErrorAsync(() => writeShardedModel(dir, [{ name: 'a', dtype: 'U8', shape: [1], data: new Uint8Array(1) }], { maxShardBytes: 4 }));
      setCommitStepObserver(undefined);
      expectCode(full, 'IO_ERROR');
      expect(full.message).toContain('ENOSPC');
    });
  });

  // Node's refusal of a path argument (ERR_INVALID_ARG_VALUE, a TypeError with a string code) was
  // reported as IO_ERROR "file system error ERR_INVALID_ARG_VALUE".
  it("a NUL byte in a path is INVALID_ARGUMENT naming it, not a file system error", async () => {
    await withTempDir(async (dir) => {
      const tensorsToWrite = [{ name: 'a', dtype: 'U8' as const, shape: [1], data: new Uint8Array(1) }];
      for (const write of [
        () => writeShardedModel(join(dir, 'a\0b'), tensorsToWrite, { maxShardBytes: 4 }),
        () => writeSafetensorsFile(join(dir, 'a\0b.safetensors'), tensorsToWrite),
      ]) {
        const error = await catchErrorAsync(write);
        expectCode(error, 'INVALID_ARGUMENT');
        expect(error.message).toMatch(/null bytes|NUL/);
      }
      expect(await readdir(dir)).toEqual([]);
    });
  });

  it('a ByteSource whose list() returns no array is INVALID_ARGUMENT', async () => {
    const source: ByteSource = { url: 'mem://m/', list: async () => null as never, open: async () => undefined };
    const error = await catchErrorAsync(() => openSafetensorsModel({ source }));
    expectCode(error, 'INVALID_ARGUMENT');
    expect(error.file).toBe('mem://m/');
  });

  it('metadata that is not a plain object of strings is refused, not mangled', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'x.safetensors');
      for (const metadata of ['pt', ['x'], new Map([['a', 'b']]), 5, { k: 1 }, { k: undefined }]) {
        const error = await catchErrorAsync(() => writeSafetensorsFile(path, [ok], metadata as never));
        expectCode(error, 'WRITE_INVALID_TENSOR');
        expect(error.tensor).toBe('__metadata__');
        expectCode(await catchErrorAsync(() => writeShardedModel(join(dir, 'm'), [ok], { maxShardBytes: 2, shardMetadata: metadata as never })), 'WRITE_INVALID_TENSOR');
      }
      expect(await readdir(dir)).toEqual([]);
      await writeSafetensorsFile(path, [ok], Object.assign(Object.create(null) as Record<string, string>, { format: 'pt' }));
      const model = await openSafetensorsModel(path);
      expect(model.shards[0]?.metadata).toEqual({ format: 'pt' });
      await model.close();
    });
  });
});
