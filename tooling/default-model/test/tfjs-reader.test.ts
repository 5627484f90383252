import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultModelError, convertTfjsToSafetensors, readTfjsWeights } from '../src/index.js';
import { openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'splitzip-tfjs-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes model.json + the group's bytes split over shards of `shardBytes`. */
async function writeTfjs(name: string, weights: unknown[], data: Uint8Array, shardBytes = 7): Promise<string> {
  const paths: string[] = [];
  for (let at = 0, i = 0; at < data.length || i === 0; at += shardBytes, i++) {
    const path = `${name}-shard${i}`;
    await writeFile(join(dir, path), data.subarray(at, at + shardBytes));
    paths.push(path);
  }
  const modelJson = join(dir, `${name}.json`);
  await writeFile(modelJson, JSON.stringify({ modelTopology: {}, weightsManifest: [{ paths, weights }] }));
  return modelJson;
}

const bytesOf = (array: ArrayBufferView) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

async function expectCode(run: () => Promise<unknown>, code: string) {
  const error = await run().then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(DefaultModelError);
  expect((error as DefaultModelError).code).toBe(code);
}

describe('tfjs weights reader', () => {
  it('reads float32/int32/bool weights across shard boundaries, keeping NaN payload bits', async () => {
    const f = new Uint32Array([0x3f800000, 0x7f800001, 0xff812345, 0x00000001, 0xc0490fdb]);
    const i = new Int32Array([-1, 7, 2 ** 31 - 1]);
    const b = new Uint8Array([1, 0, 1, 1]);
    const path = await writeTfjs('plain', [
      { name: 'f', shape: [5], dtype: 'float32' },
      { name: 'scalar', shape: [], dtype: 'int32' },
      { name: 'i', shape: [3], dtype: 'int32' },
      { name: 'b', shape: [2, 2], dtype: 'bool' },
    ], concat(bytesOf(f), bytesOf(new Int32Array([42])), bytesOf(i), b));
    const weights = await readTfjsWeights(path);
    expect(weights.map((w) => [w.name, w.dtype, w.shape])).toEqual([['f', 'float32', [5]], ['scalar', 'int32', []], ['i', 'int32', [3]], ['b', 'bool', [2, 2]]]);
    expect(Array.from(new Uint32Array(weights[0]!.bytes.slice().buffer))).toEqual(Array.from(f));
    expect(Array.from(new Int32Array(weights[2]!.bytes.slice().buffer))).toEqual(Array.from(i));

    const out = await convertTfjsToSafetensors(path, join(dir, 'plain-out'), { maxShardBytes: 12 });
    expect(out.shardPaths.length).toBeGreaterThanOrEqual(2);
    const model = await openSafetensorsModel(out.indexPath);
    expect(model.tensors.map((t) => [t.name, t.dtype])).toEqual([['f', 'BF16'], ['scalar', 'I32'], ['i', 'I32'], ['b', 'BOOL']]);
    expect(Array.from(new Uint16Array((await readTensorBytes(model, 'f')).slice().buffer))).toEqual([0x3f80, 0x7fc0, 0xffc1, 0x0000, 0xc049]);
    expect(Array.from(await readTensorBytes(model, 'b'))).toEqual([1, 0, 1, 1]);
    await model.close();
  });

  it('dequantizes uint8/uint16 (scale, min) and float16 like tfjs', async () => {
    const q8 = new Uint8Array([0, 1, 255]);
    const q16 = new Uint16Array([0, 1000, 65535]);
    const h = new Uint16Array([0x3c00, 0xc000, 0x0001]); // 1, -2, smallest subnormal
    const qi = new Uint8Array([0, 3]);
    const path = await writeTfjs('quant', [
      { name: 'q8', shape: [3], dtype: 'float32', quantization: { dtype: 'uint8', scale: 0.1, min: -1 } },
      { name: 'q16', shape: [3], dtype: 'float32', quantization: { dtype: 'uint16', scale: 0.001, min: 0.5 } },
      { name: 'h', shape: [3], dtype: 'float32', quantization: { dtype: 'float16' } },
      { name: 'qi', shape: [2], dtype: 'int32', quantization: { dtype: 'uint8', scale: 0.5, min: 1, original_dtype: 'int32' } },
    ], concat(q8, bytesOf(q16), bytesOf(h), qi), 5);
    const weights = await readTfjsWeights(path);
    const floats = (k: number) => Array.from(new Float32Array(weights[k]!.bytes.slice().buffer));
    expect(floats(0)).toEqual([Math.fround(-1), Math.fround(0.1 - 1), Math.fround(25.5 - 1)]);
    expect(floats(1)).toEqual([Math.fround(0.5), Math.fround(1000 * 0.001 + 0.5), Math.fround(65535 * 0.001 + 0.5)]);
    expect(floats(2)).toEqual([1, -2, 2 ** -24]);
    expect(weights[3]!.dtype).toBe('int32');
    expect(Array.from(new Int32Array(weights[3]!.bytes.slice().buffer))).toEqual([1, 3]);
  });

  it('rejects unsupported dtypes and quantizations, size mismatches and escaping paths with clear errors', async () => {
    await expectCode(async () => readTfjsWeights(await writeTfjs('str', [{ name: 's', shape: [1], dtype: 'string' }], new Uint8Array(4))), 'TFJS_UNSUPPORTED_DTYPE');
    await expectCode(async () => readTfjsWeights(await writeTfjs('q', [{ name: 'q', shape: [1], dtype: 'float32', quantization: { dtype: 'int4' } }], new Uint8Array(1))), 'TFJS_UNSUPPORTED_QUANTIZATION');
    await expectCode(async () => readTfjsWeights(await writeTfjs('q2', [{ name: 'q', shape: [1], dtype: 'float32', quantization: { dtype: 'uint8' } }], new Uint8Array(1))), 'TFJS_UNSUPPORTED_QUANTIZATION');
    await expectCode(async () => readTfjsWeights(await writeTfjs('short', [{ name: 'f', shape: [3], dtype: 'float32' }], new Uint8Array(11))), 'TFJS_SIZE_MISMATCH');
    await expectCode(async () => readTfjsWeights(await writeTfjs('long', [{ name: 'f', shape: [3], dtype: 'float32' }], new Uint8Array(13))), 'TFJS_SIZE_MISMATCH');
    await expectCode(async () => readTfjsWeights(await writeTfjs('shape', [{ name: 'f', shape: [-1], dtype: 'float32' }], new Uint8Array(0))), 'TFJS_INVALID_MANIFEST');
    const escaping = join(dir, 'escape.json');
    await writeFile(escaping, JSON.stringify({ weightsManifest: [{ paths: ['../x'], weights: [] }] }));
    await expectCode(() => readTfjsWeights(escaping), 'TFJS_INVALID_MANIFEST');
    await writeFile(escaping, JSON.stringify({ modelTopology: {} }));
    await expectCode(() => readTfjsWeights(escaping), 'TFJS_INVALID_MANIFEST');
    await expectCode(() => readTfjsWeights(join(dir, 'none.json')), 'SOURCE_NOT_FOUND');
  });
});
