import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  createSafetensorsWriter,
  createShardedModelWriter,
  iterateTensors,
  openSafetensorsModel,
  parseSafetensorsBytes,
  readTensorBytes,
  resumeShardedModelWrite,
  writeSafetensorsFile,
  writeShardedModel,
  type SafetensorsModel,
  type TensorInfo,
  type TensorToWrite,
} from '../src/index.js';
import { catchErrorAsync, expectCode, withTempDir } from './helpers.js';

const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'U8', shape: [4], data: Uint8Array.of(1, 2, 3, 4) },
  { name: 'b', dtype: 'U8', shape: [2], data: Uint8Array.of(5, 6) },
];

async function withModel(run: (model: SafetensorsModel, dir: string) => Promise<void>): Promise<void> {
  await withTempDir(async (dir) => {
    const path = join(dir, 'model.safetensors');
    await writeSafetensorsFile(path, tensors);
    const model = await openSafetensorsModel(path);
    try {
      await run(model, dir);
    } finally {
      await model.close();
    }
  });
}

async function expectInvalid(run: () => Promise<unknown>, ...parts: string[]): Promise<void> {
  const error = await catchErrorAsync(run);
  expectCode(error, 'INVALID_ARGUMENT');
  for (const part of parts) expect(error.message).toContain(part);
}

describe('unknown option keys are refused with the name most likely meant', () => {
  it('iterateTensors (a misspelt maxBufferBytes was ignored and the 16 MiB default used)', async () => {
    await withModel(async (model) => {
      const misspelt = await catchErrorAsync(() => iterateTensors(model, { maxBuferBytes: 1 } as never).next());
      expectCode(misspelt, 'INVALID_ARGUMENT');
      expect(misspelt.message).toContain('iterateTensors: unknown option "maxBuferBytes": did you mean "maxBufferBytes"?');
      expect(misspelt.key).toBe('maxBuferBytes');
      await expectInvalid(() => iterateTensors(model, { reuse: true } as never).next(), 'unknown option "reuse"', 'known: maxBufferBytes, reuseBuffers, filter');
      await expectInvalid(() => iterateTensors(model, { reuseBuffers: 'yes' } as never).next(), 'reuseBuffers must be true or false', 'got "yes"');
      await expectInvalid(() => iterateTensors(model, null as never).next(), 'options must be an object', 'got null');
      const names: string[] = [];
      for await (const { tensor } of iterateTensors(model, { maxBufferBytes: 1, reuseBuffers: undefined })) names.push(tensor.name);
      expect(names).toEqual(['a', 'b']);
    });
  });

  it('the writers, resumeShardedModelWrite and openSafetensorsModel({ source })', async () => {
    await withTempDir(async (dir) => {
      await expectInvalid(() => createSafetensorsWriter(join(dir, 'x.safetensors'), tensors, { metdata: {} } as never), 'createSafetensorsWriter: unknown option "metdata"', 'did you mean "metadata"?');
      await expectInvalid(() => createShardedModelWriter(join(dir, 'm'), tensors, { maxShardBytes: 4, shardMetdata: {} } as never), 'did you mean "shardMetadata"?');
      await expectInvalid(() => writeShardedModel(join(dir, 'm'), tensors, { maxShardByte: 4 } as never), 'did you mean "maxShardBytes"?');
      await expectInvalid(() => resumeShardedModelWrite(join(dir, 'm'), { writerStoped: true } as never), 'did you mean "writerStopped"?');
      const source = { url: 'mem://', list: async () => [], open: async () => undefined };
      await expectInvalid(() => openSafetensorsModel({ source, ownSource: true } as never), 'did you mean "ownsSource"?');
    });
  });
});

describe('writeSafetensorsFile takes the metadata itself or the writer options { metadata }', () => {
  it('both forms write the same __metadata__; { metadata } with another key is refused naming it', async () => {
    await withTempDir(async (dir) => {
      const plain = join(dir, 'plain.safetensors');
      const wrapped = join(dir, 'wrapped.safetensors');
      await writeSafetensorsFile(plain, tensors, { format: 'pt' });
      // Was WRITE_INVALID_TENSOR 'metadata "metadata" is not a string'.
      await writeSafetensorsFile(wrapped, tensors, { metadata: { format: 'pt' } });
      expect(await readFile(wrapped)).toEqual(await readFile(plain));
      expect(parseSafetensorsBytes(await readFile(wrapped), wrapped).metadata).toEqual({ format: 'pt' });
      await writeSafetensorsFile(wrapped, tensors, { metadata: null });
      expect(parseSafetensorsBytes(await readFile(wrapped), wrapped).metadata).toBeNull();
      // A metadata entry named "metadata" (a string) is still metadata.
      await writeSafetensorsFile(wrapped, tensors, { metadata: 'kept' });
      expect(parseSafetensorsBytes(await readFile(wrapped), wrapped).metadata).toEqual({ metadata: 'kept' });
      await expectInvalid(() => writeSafetensorsFile(wrapped, tensors, { metadata: {}, fromat: 'pt' } as never), 'writeSafetensorsFile: unknown option "fromat"');
    });
  });
});

describe('readTensorBytes arguments', () => {
  it('a target that is no Uint8Array says what it got; null or a nameless tensor is INVALID_ARGUMENT', async () => {
    await withModel(async (model) => {
      await expectInvalid(() => readTensorBytes(model, 'a', new Uint16Array(4) as never), 'target must be a Uint8Array', 'got Uint16Array(8 bytes)');
      // Was UNKNOWN_TENSOR `tensor "undefined"`.
      await expectInvalid(() => readTensorBytes(model, null as never), 'tensor must be a tensor name or a TensorInfo', 'got null');
      await expectInvalid(() => readTensorBytes(model, {} as never), 'got {}');
      await expectInvalid(() => readTensorBytes(null as never, 'a'), 'model must be a model opened by openSafetensorsModel()', 'got null');
    });
  });

  it('a TensorInfo of the right name but another slice is refused as not matching this model entry', async () => {
    await withModel(async (model) => {
      const real = model.getTensor('a') as TensorInfo;
      const forged: TensorInfo = { ...real, slice: { ...real.slice, offsetBytes: real.slice.offsetBytes + 1 } };
      const error = await catchErrorAsync(() => readTensorBytes(model, forged));
      expectCode(error, 'UNKNOWN_TENSOR');
      expect(error.tensor).toBe('a');
      expect(error.message).toContain("does not match this model's entry for that name");
      expect(error.message).not.toContain('no such tensor');
      const missing = await catchErrorAsync(() => readTensorBytes(model, 'zz'));
      expect(missing.message).toContain('no such tensor in this model');
    });
  });

  it('types: a read without target (and iterateTensors bytes) is over an ordinary ArrayBuffer; with one, over its buffer', async () => {
    await withModel(async (model) => {
      const bytes = await readTensorBytes(model, 'a');
      expectTypeOf(bytes).toEqualTypeOf<Uint8Array<ArrayBuffer>>();
      expect(bytes.buffer).toBeInstanceOf(ArrayBuffer);
      expect([...bytes]).toEqual([1, 2, 3, 4]);
      const shared = new Uint8Array(new SharedArrayBuffer(8));
      const into = await readTensorBytes(model, 'b', shared);
      expectTypeOf(into).toEqualTypeOf<Uint8Array<SharedArrayBuffer>>();
      expect(into.buffer).toBe(shared.buffer);
      for await (const item of iterateTensors(model)) {
        expectTypeOf(item.bytes).toEqualTypeOf<Uint8Array<ArrayBuffer>>();
        expect(item.bytes.buffer).toBeInstanceOf(ArrayBuffer);
      }
    });
  });
});
