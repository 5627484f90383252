import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_BUFFER_BYTES, iterateTensors, openSafetensorsModel, readTensorBytes, type IterateTensorsOptions } from '../src/index.js';
import { catchErrorAsync, expectCode, headerText, withTempDir } from './helpers.js';

// One BF16 tensor of 2^31 + 64 values: 2^32 + 128 bytes, legal for the format, one more row of
// values than a Node 20 buffer holds (MAX_BUFFER_BYTES = 2^32). Derived from the limit so the case
// stays just over it wherever it runs.
const BIG_VALUES = Math.floor(MAX_BUFFER_BYTES / 2) + 64;
const BIG_BYTES = 2 * BIG_VALUES;
const SMALL = new Uint8Array(128).map((_, i) => i + 1);

/** A sparse file (ftruncate: no real gigabytes) holding `small` (64 BF16) then `big`. */
async function writeBigModel(dir: string): Promise<string> {
  const path = join(dir, 'model.safetensors');
  const text = headerText({
    small: { dtype: 'BF16', shape: [64], data_offsets: [0, 128] },
    big: { dtype: 'BF16', shape: [BIG_VALUES], data_offsets: [128, 128 + BIG_BYTES] },
  }).padEnd(256, ' ');
  const header = new Uint8Array(8 + text.length);
  new DataView(header.buffer).setBigUint64(0, BigInt(text.length), true);
  header.set(new TextEncoder().encode(text), 8);
  const handle = await open(path, 'w');
  try {
    await handle.write(header, 0, header.length, 0);
    await handle.write(SMALL, 0, SMALL.length, header.length);
    await handle.truncate(header.length + 128 + BIG_BYTES);
  } finally {
    await handle.close();
  }
  return path;
}

async function collect(path: string, options?: IterateTensorsOptions) {
  const model = await openSafetensorsModel(path);
  const got: { name: string; bytes: Uint8Array }[] = [];
  try {
    const error = await catchErrorAsync(async () => {
      for await (const { tensor, bytes } of iterateTensors(model, options)) got.push({ name: tensor.name, bytes: bytes.slice() });
    }).catch((failure: unknown) => failure);
    return { got, error };
  } finally {
    await model.close();
  }
}

describe('a tensor larger than one buffer (sparse fixture)', () => {
  it('readTensorBytes: TENSOR_TOO_LARGE naming the tensor and its size; a smaller caller target is still TARGET_TOO_SMALL', async () => {
    await withTempDir(async (dir) => {
      const path = await writeBigModel(dir);
      const model = await openSafetensorsModel(path);
      try {
        const big = model.getTensor('big')!;
        expect(big.slice.sizeBytes).toBe(BIG_BYTES);
        const error = await catchErrorAsync(() => readTensorBytes(model, 'big'));
        expectCode(error, 'TENSOR_TOO_LARGE');
        expect(error.tensor).toBe('big');
        expect(error.file).toBe(path);
        expect(error.offsets).toEqual({ expected: MAX_BUFFER_BYTES, actual: BIG_BYTES, position: big.slice.offsetBytes });
        expectCode(await catchErrorAsync(() => readTensorBytes(model, big, new Uint8Array(16))), 'TARGET_TOO_SMALL');
        expect(await readTensorBytes(model, 'small')).toEqual(SMALL);
      } finally {
        await model.close();
      }
    });
  });

  it('iterateTensors yields the tensors before it, then throws TENSOR_TOO_LARGE for it (fresh or reused buffers, any maxBufferBytes)', async () => {
    await withTempDir(async (dir) => {
      const path = await writeBigModel(dir);
      for (const options of [{}, { reuseBuffers: true }, { maxBufferBytes: 2 ** 40 }, { maxBufferBytes: 2 ** 40, reuseBuffers: true }]) {
        const { got, error } = await collect(path, options);
        expect(got.map((t) => t.name), JSON.stringify(options)).toEqual(['small']);
        expect(got[0]?.bytes).toEqual(SMALL);
        expect(error).toMatchObject({ code: 'TENSOR_TOO_LARGE', tensor: 'big', file: path, offsets: { actual: BIG_BYTES } });
      }
    });
  });

  it('iterateTensors with a filter leaving such tensors out completes', async () => {
    await withTempDir(async (dir) => {
      const path = await writeBigModel(dir);
      const model = await openSafetensorsModel(path);
      try {
        const names: string[] = [];
        for await (const { tensor } of iterateTensors(model, { filter: (t) => t.slice.sizeBytes <= MAX_BUFFER_BYTES })) names.push(tensor.name);
        expect(names).toEqual(['small']);
      } finally {
        await model.close();
      }
    });
  });
});
