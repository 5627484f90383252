import { open, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { iterateTensors, openSafetensorsModel, readTensorBytes, writeSafetensorsFile, type ByteSource, type TensorToWrite } from '../src/index.js';
import type * as Limits from '../src/limits.js';
import { createRandom, randomBytes, withTempDir } from './helpers.js';

// A tiny chunk so that ordinary tensors take several pieces: the real 1 GiB bound would need
// gigabyte reads to exercise.
const CHUNK = 64;
vi.mock('../src/limits.js', async (importOriginal) => ({ ...(await importOriginal<typeof Limits>()), MAX_READ_CHUNK_BYTES: 64 }));

const random = createRandom(11);
const tensors: TensorToWrite[] = [
  { name: 'a', dtype: 'U8', shape: [1000], data: randomBytes(random, 1000) },
  { name: 'b', dtype: 'BF16', shape: [3, 50], data: randomBytes(random, 300) },
];

afterEach(() => {
  vi.restoreAllMocks();
});

describe('no single read is longer than MAX_READ_CHUNK_BYTES', () => {
  it('files: header, readTensorBytes and iterateTensors read in pieces', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'm.safetensors');
      await writeSafetensorsFile(path, tensors);
      const probe = await open(path, 'r');
      const prototype = Object.getPrototypeOf(probe) as { read: (...args: unknown[]) => unknown };
      await probe.close();
      const read = vi.spyOn(prototype, 'read');
      const model = await openSafetensorsModel(path);
      try {
        expect(await readTensorBytes(model, 'a')).toEqual(tensors[0]!.data);
        for await (const { tensor, bytes } of iterateTensors(model)) expect(bytes).toEqual(tensors.find((t) => t.name === tensor.name)!.data);
      } finally {
        await model.close();
      }
      expect(read.mock.calls.length).toBeGreaterThan(1300 / CHUNK);
      for (const call of read.mock.calls) expect(call[2]).toBeLessThanOrEqual(CHUNK);
    });
  });

  it('ByteSource objects: the index, headers and tensors are read in pieces', async () => {
    await withTempDir(async (dir) => {
      await writeSafetensorsFile(join(dir, 'model.safetensors'), tensors);
      const objects = new Map<string, Uint8Array>();
      for (const name of await readdir(dir)) objects.set(name, new Uint8Array(await readFile(join(dir, name))));
      const lengths: number[] = [];
      const source: ByteSource = {
        url: 'mem://m/',
        list: async () => [...objects.keys()],
        open: async (name) => {
          const bytes = objects.get(name);
          return bytes && {
            sizeBytes: bytes.length,
            readInto: async (offsetBytes, target) => {
              lengths.push(target.length);
              target.set(bytes.subarray(offsetBytes, offsetBytes + target.length));
            },
          };
        },
      };
      const model = await openSafetensorsModel({ source });
      try {
        expect(await readTensorBytes(model, 'a')).toEqual(tensors[0]!.data);
        for await (const { tensor, bytes } of iterateTensors(model)) expect(bytes).toEqual(tensors.find((t) => t.name === tensor.name)!.data);
      } finally {
        await model.close();
      }
      expect(lengths.length).toBeGreaterThan(1300 / CHUNK);
      expect(Math.max(...lengths)).toBeLessThanOrEqual(CHUNK);
    });
  });

  it('writes: no single write is longer either (Node refuses one above 2^31 - 1)', async () => {
    await withTempDir(async (dir) => {
      const path = join(dir, 'w.safetensors');
      const probe = await open(join(dir, 'probe'), 'w');
      const prototype = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => unknown };
      await probe.close();
      const write = vi.spyOn(prototype, 'write');
      await writeSafetensorsFile(path, tensors);
      expect(write.mock.calls.length).toBeGreaterThan(1300 / CHUNK);
      for (const call of write.mock.calls) expect(call[2]).toBeLessThanOrEqual(CHUNK);
      write.mockRestore();
      const model = await openSafetensorsModel(path);
      try {
        for (const tensor of tensors) expect(await readTensorBytes(model, tensor.name)).toEqual(tensor.data);
      } finally {
        await model.close();
      }
    });
  });
});
