import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iterateTensors, openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';
import { CONVERTER_VERSION, defaultModelSource, ensureDefaultModel, readTfjsWeights, type TfjsWeight } from '../src/index.js';

let dir: string;
let outDir: string;
let source: TfjsWeight[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'splitzip-default-model-'));
  outDir = join(dir, 'default');
  source = await readTfjsWeights(defaultModelSource().modelJsonPath);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Reference rounding written separately from the converter: nearest, ties to even, NaN quieted. */
function referenceBf16(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff;
  const upper = bits >>> 16;
  const lower = bits & 0xffff;
  const roundUp = lower > 0x8000 || (lower === 0x8000 && (upper & 1) === 1);
  return (upper + (roundUp ? 1 : 0)) & 0xffff;
}

describe('the built-in default model (Universal Sentence Encoder lite)', () => {
  it('is the expected real model: ~7.0 M float32 values in 35 tensors, plus int32 constants', () => {
    const floats = source.filter((w) => w.dtype === 'float32');
    expect(floats).toHaveLength(35);
    const values = floats.reduce((n, w) => n + w.bytes.length / 4, 0);
    expect(values).toBeGreaterThan(6_900_000);
    expect(values).toBeLessThan(7_100_000);
    expect(source.some((w) => w.dtype === 'int32')).toBe(true);
  });

  it('generates a sharded BF16 safetensors model whose every value is the correctly rounded source value', async () => {
    expect(await ensureDefaultModel({ outDir })).toBe(outDir);
    const model = await openSafetensorsModel(outDir);
    try {
      expect(model.indexPath).toBe(join(outDir, 'model.safetensors.index.json'));
      expect(model.shards.length).toBeGreaterThanOrEqual(2);
      expect(model.tensors.map((t) => t.name)).toEqual(source.map((w) => w.name));
      let checked = 0;
      for await (const { tensor, bytes } of iterateTensors(model)) {
        const weight = source.find((w) => w.name === tensor.name) as TfjsWeight;
        expect(tensor.shape).toEqual(weight.shape);
        if (weight.dtype === 'float32') {
          expect(tensor.dtype).toBe('BF16');
          const src = new DataView(weight.bytes.buffer, weight.bytes.byteOffset, weight.bytes.byteLength);
          const dst = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
          expect(bytes.length * 2).toBe(weight.bytes.length);
          for (let i = 0; i < bytes.length / 2; i++) {
            const expected = referenceBf16(src.getUint32(i * 4, true));
            const actual = dst.getUint16(i * 2, true);
            if (actual !== expected) throw new Error(`${tensor.name}[${i}]: ${actual.toString(16)} != ${expected.toString(16)}`);
            checked++;
          }
        } else {
          // int32 constants stay int32, byte for byte (the builder skips non-BF16 tensors).
          expect(tensor.dtype).toBe('I32');
          expect(Buffer.from(bytes).equals(Buffer.from(weight.bytes))).toBe(true);
        }
      }
      expect(checked).toBeGreaterThan(6_900_000);
    } finally {
      await model.close();
    }
  });

  it('the generated files read back bit-identical through every path (index, directory, single shard)', async () => {
    await ensureDefaultModel({ outDir });
    const viaIndex = await openSafetensorsModel(join(outDir, 'model.safetensors.index.json'));
    const viaDir = await openSafetensorsModel(outDir);
    try {
      const digest = async (model: typeof viaIndex) => {
        const hash = createHash('sha256');
        for (const tensor of model.tensors) hash.update(await readTensorBytes(model, tensor));
        return hash.digest('hex');
      };
      expect(await digest(viaDir)).toBe(await digest(viaIndex));
      const first = await openSafetensorsModel(viaIndex.shards[0]!.path);
      for (const tensor of first.tensors) {
        expect(viaIndex.findBySlice(tensor.slice)?.name).toBe(tensor.name);
        expect(Buffer.from(await readTensorBytes(first, tensor)).equals(Buffer.from(await readTensorBytes(viaIndex, tensor.name)))).toBe(true);
      }
      await first.close();
    } finally {
      await viaIndex.close();
      await viaDir.close();
    }
  });

  it('regenerates only when missing or out of date (stamp: source hash + converter version + file sizes)', async () => {
    await ensureDefaultModel({ outDir });
    const stampPath = join(outDir, '.default-model.stamp.json');
    const stamp = JSON.parse(await readFile(stampPath, 'utf8')) as { converterVersion: string; files: { name: string }[] };
    expect(stamp.converterVersion).toBe(CONVERTER_VERSION);
    const shard = join(outDir, stamp.files.find((f) => f.name.endsWith('.safetensors'))!.name);
    const before = (await stat(shard)).mtimeMs;
    await ensureDefaultModel({ outDir });
    expect((await stat(shard)).mtimeMs).toBe(before); // up to date: untouched
    // A damaged shard (size differs from the stamp) is regenerated.
    await truncate(shard, 100);
    await ensureDefaultModel({ outDir });
    expect((await stat(shard)).size).toBeGreaterThan(100);
    await (await openSafetensorsModel(outDir)).close();
    // Another converter version in the stamp regenerates; a stale extra shard is removed.
    await writeFile(stampPath, JSON.stringify({ ...stamp, converterVersion: 'old' }));
    await writeFile(join(outDir, 'model-00009-of-00009.safetensors'), 'stale');
    await ensureDefaultModel({ outDir });
    const after = JSON.parse(await readFile(stampPath, 'utf8')) as { converterVersion: string };
    expect(after.converterVersion).toBe(CONVERTER_VERSION);
    await expect(stat(join(outDir, 'model-00009-of-00009.safetensors'))).rejects.toThrow();
  });
});
