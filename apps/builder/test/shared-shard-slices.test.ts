// Two models whose shards share a file name and spans built into one cache: a diffusers pipeline's
// text_encoder/model.safetensors and text_encoder_2/model.safetensors, tensors of one shape at one
// offset holding other bytes. A slice key is (shard name, offset, size), so the second build finds
// the first one's bindings at its slices: it stopped SLICE_CONFLICT. It now stores its tensors by
// content key, leaves bindings recorded only from the other file as they are (sliceTakenBy,
// slices_taken_by_other_files), says so once on stderr and exits 0; both models' bytes come back
// bit-exact from the cache (the first's by slice, the second's by content key: the runtime serves
// those raw, checked by their hash). A binding of the same file changed in place still stops.
import { cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decode } from '@splitzip/codec';
import { openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildReport } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-shared-shard-slices-');
});
afterAll(async () => temp?.cleanup());

/** text_encoder/ and text_encoder_2/, each a model.safetensors of two [64, 64] tensors: one header length, so one pair of spans. */
async function writePipeline(name: string, seeds: { first: [number, number]; second: [number, number] }): Promise<{ first: string; second: string }> {
  const dir = join(temp.path, name);
  await mkdir(join(dir, 'text_encoder'), { recursive: true });
  await mkdir(join(dir, 'text_encoder_2'), { recursive: true });
  const first = await writeSingleFileModel(join(dir, 'text_encoder', 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], seeds.first[0]), gaussianBf16('b.weight', [64, 64], seeds.first[1])]);
  const second = await writeSingleFileModel(join(dir, 'text_encoder_2', 'model.safetensors'), [gaussianBf16('c.weight', [64, 64], seeds.second[0]), gaussianBf16('d.weight', [64, 64], seeds.second[1])]);
  return { first, second };
}

/**
 * Each tensor of the model, as the cache holds it: the entry its slice is bound to where that
 * entry's key is the tensor's (a slice lookup), else the entry of its content key; decoded.
 */
async function readBack(cacheDir: string, modelPath: string): Promise<{ name: string; bySlice: boolean; exact: boolean }[]> {
  const store = await openCacheStore(cacheDir, { create: false });
  const model = await openSafetensorsModel(modelPath);
  try {
    const found = [];
    for (const tensor of model.tensors) {
      const bytes = await readTensorBytes(model, tensor);
      const { shardName, offsetBytes, sizeBytes } = tensor.slice;
      const byKey = store.lookup(bytes, tensor.shape, tensor.dtype);
      const bySlice = store.lookupBySlice(shardName, offsetBytes, sizeBytes);
      const entry = bySlice !== undefined && bySlice.key === byKey?.key ? bySlice : byKey;
      if (entry === undefined) {
        found.push({ name: tensor.name, bySlice: false, exact: false });
        continue;
      }
      const decoded = decode(await store.readBlob(entry.key, new Uint8Array(entry.compBytes)));
      found.push({ name: tensor.name, bySlice: entry === bySlice, exact: Buffer.compare(Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength), Buffer.from(bytes)) === 0 });
    }
    return found;
  } finally {
    await model.close();
    await store.close();
  }
}

async function bindingsOf(cacheDir: string, modelPath: string): Promise<{ key: string | undefined; stamps: readonly string[] }[]> {
  const store = await openCacheStore(cacheDir, { create: false });
  const model = await openSafetensorsModel(modelPath);
  try {
    return model.tensors.map(({ slice }) => {
      const binding = store.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes);
      return { key: binding?.entry.key, stamps: binding?.stamps ?? [] };
    });
  } finally {
    await model.close();
    await store.close();
  }
}

const NOTE = 'splitzip build: note: ';

describe('two models with one shard name and one layout in one cache', () => {
  it('either order: the second build stores its tensors by content key, leaves the first one\'s bindings, says so once and exits 0; both read back bit-exact', async () => {
    const pipeline = await writePipeline('differ', { first: [1, 2], second: [3, 4] });
    for (const [one, other] of [
      [pipeline.first, pipeline.second],
      [pipeline.second, pipeline.first],
    ] as const) {
      const cacheDir = join(temp.path, `cache-differ-${one === pipeline.first ? 'ab' : 'ba'}`);
      expect((await run(['build', one, '--out', cacheDir, '--quiet'])).code).toBe(0);
      const oneBindings = await bindingsOf(cacheDir, one);
      // --json, into a copy: the report's count and each tensor's sliceTakenBy.
      const jsonCache = `${cacheDir}-json`;
      await cp(cacheDir, jsonCache, { recursive: true });
      const json = await run(['build', other, '--out', jsonCache, '--json']);
      expect(json.err).toBe('');
      expect(json.code).toBe(0);
      const report = JSON.parse(json.out) as BuildReport;
      expect(report).toMatchObject({ encoded: 2, cached: 0, aliased: 0, slices_taken_by_other_files: 2, unaliased: 0, unbound_stale: 0 });
      expect(report.tensors.map((t) => t.sliceTakenBy)).toEqual(oneBindings.map((b) => b.key));

      const text = await run(['build', other, '--out', cacheDir]);
      expect(text.code).toBe(0);
      expect(text.err.split(NOTE).length - 1).toBe(1);
      expect(text.err).toContain(`${NOTE}2 tensors of shard name model.safetensors stored by content key only`);
      expect(text.err).toContain('build --rebind moves the bindings to this model');
      expect(text.out).toContain('encoded, slice taken by another file');
      expect(text.out).toContain('; 2 of them stored by content key only');
      // The first model's bindings are as they were; both models' bytes are in the cache.
      expect(await bindingsOf(cacheDir, one)).toEqual(oneBindings);
      expect(await readBack(cacheDir, one)).toEqual([
        { name: expect.any(String), bySlice: true, exact: true },
        { name: expect.any(String), bySlice: true, exact: true },
      ]);
      expect(await readBack(cacheDir, other)).toEqual([
        { name: expect.any(String), bySlice: false, exact: true },
        { name: expect.any(String), bySlice: false, exact: true },
      ]);
      // A re-run of either writes nothing and changes no binding.
      const again = JSON.parse((await run(['build', other, '--out', cacheDir, '--json'])).out) as BuildReport;
      expect(again).toMatchObject({ encoded: 0, cached: 2, aliased: 0, slices_taken_by_other_files: 2 });
      expect(JSON.parse((await run(['build', one, '--out', cacheDir, '--json'])).out)).toMatchObject({ encoded: 0, cached: 2, aliased: 0, slices_taken_by_other_files: 0 });
      expect(await bindingsOf(cacheDir, one)).toEqual(oneBindings);

      // verify: the first model cached; the second not cached (another file's binding), no failure.
      expect((await run(['verify', cacheDir, '--model', one])).code).toBe(0);
      const verify = await run(['verify', cacheDir, '--model', other, '--json']);
      expect(verify.code).toBe(0);
      const tensors = (JSON.parse(verify.out) as { model: { tensors: { status: string; reason: string | null }[] } }).model.tensors;
      expect(tensors.map((t) => t.status)).toEqual(['not_cached', 'not_cached']);
      expect(tensors[0]!.reason).toContain('from another file of shard name model.safetensors');

      // --rebind keeps its meaning: the bindings move to this model.
      const rebind = JSON.parse((await run(['build', other, '--out', cacheDir, '--rebind', '--json'])).out) as BuildReport;
      expect(rebind).toMatchObject({ encoded: 0, cached: 2, aliased: 2, slices_taken_by_other_files: 0 });
      expect((await readBack(cacheDir, other)).every((t) => t.bySlice && t.exact)).toBe(true);
    }
  });

  it('a tensor whose bytes the other model holds at that slice is bound (its stamp added); only the one of other bytes is left', async () => {
    const pipeline = await writePipeline('same', { first: [1, 2], second: [1, 4] });
    const cacheDir = join(temp.path, 'cache-same');
    expect((await run(['build', pipeline.first, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const before = await bindingsOf(cacheDir, pipeline.first);
    const built = await run(['build', pipeline.second, '--out', cacheDir, '--json']);
    expect(built.code).toBe(0);
    const report = JSON.parse(built.out) as BuildReport;
    expect(report).toMatchObject({ encoded: 1, cached: 1, aliased: 1, slices_taken_by_other_files: 1 });
    expect(report.tensors.map((t) => [t.status, t.sliceTakenBy])).toEqual([
      ['cached', undefined],
      ['encoded', before[1]!.key],
    ]);
    const after = await bindingsOf(cacheDir, pipeline.second);
    expect(after.map((b) => b.key)).toEqual(before.map((b) => b.key));
    // The shared bytes' binding holds both files' stamps; the other keeps the first file's only.
    expect(after[0]!.stamps).toHaveLength(2);
    expect(after[1]!.stamps).toEqual(before[1]!.stamps);
    expect((await readBack(cacheDir, pipeline.second)).map((t) => [t.bySlice, t.exact])).toEqual([
      [true, true],
      [false, true],
    ]);
  });

  it('a binding of the same file changed in place (same inode) still stops the build: SLICE_CONFLICT, as before', async () => {
    const dir = join(temp.path, 'in-place');
    await mkdir(dir);
    const path = await writeSingleFileModel(join(dir, 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16('b.weight', [64, 64], 2)]);
    const cacheDir = join(temp.path, 'cache-in-place');
    expect((await run(['build', path, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const rewritten = await writeSingleFileModel(join(temp.path, 'in-place-new.safetensors'), [gaussianBf16('a.weight', [64, 64], 5), gaussianBf16('b.weight', [64, 64], 2)]);
    await writeFile(path, await readFile(rewritten));
    const built = await run(['build', path, '--out', cacheDir, '--quiet']);
    expect(built.code).toBe(1);
    expect(built.err).toContain('SLICE_CONFLICT');
    expect(built.err).not.toContain(NOTE);
  });
});
