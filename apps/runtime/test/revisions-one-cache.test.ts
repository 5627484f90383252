// The user probe behind FILE-BINDINGS.md: revisions A, B (= A with 3 tensors changed, one resized)
// and C (= A with 10 of 19 changed) keep their shard names, and share one cache. Each revision's
// file has a binding of its own per slice (sliceBindingsPerFile), so every load is served wholly
// from the cache, bit-exact; a file the bindings have no record of is hashed once (its first load),
// its stamp recorded with the binding whose entry its bytes are, and never hashed again.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, describe, expect, it } from 'vitest';
import { isRuntimeError } from '../src/errors.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import type { LoadTotals } from '../src/types.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const TENSOR_COUNT = 19;
/** About ten [64, 64] BF16 tensors a shard: two shards, as the probe's model had. */
const SHARD_BYTES = 80 * 1024;

const name = (k: number) => `layers.${String(k).padStart(2, '0')}.weight`;
const revisionA = (): FixtureTensor[] =>
  Array.from({ length: TENSOR_COUNT }, (_, k) => ({ name: name(k), dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 100 + k) }));
/** A with layers 2 and 15 changed, and layer 18, the last of its shard, changed and resized (the headers keep their length: the other slices are A's). */
const revisionB = (): FixtureTensor[] =>
  revisionA().map((t, k) => (k === 18 ? { ...t, shape: [64, 72], data: bf16Weights(64 * 72, 700) } : k === 2 || k === 15 ? { ...t, data: bf16Weights(4096, 200 + k) } : t));
/** A with the ten even layers changed. */
const revisionC = (): FixtureTensor[] => revisionA().map((t, k) => (k % 2 === 0 ? { ...t, data: bf16Weights(4096, 300 + k) } : t));

/** One load through a fresh cache handle (a new process's view): every tensor checked bit-exact. */
async function loadOnce(model: SafetensorsModel, cacheDir: string): Promise<LoadTotals> {
  const raw = await readAllRaw(model);
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(model, cache, { backend: 'cpu' });
    for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
    return load.totals;
  } finally {
    await cache.close();
  }
}

/** Loads each model directory through one openShardCache handle in a child process (dist); its totals. */
function loadInChild(cacheDir: string, modelDirs: readonly string[]): { fromCache: number; bytesReadRaw: number }[] {
  const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  const script = `
    import { openSafetensorsModel } from '@splitzip/safetensors';
    import { loadModel, openShardCache } from ${JSON.stringify(entry)};
    const out = [];
    for (const dir of ${JSON.stringify(modelDirs)}) {
      const cache = await openShardCache(${JSON.stringify(cacheDir)});
      const model = await openSafetensorsModel(dir);
      const load = loadModel(model, cache, { backend: 'cpu' });
      const totals = await load.drain();
      out.push({ fromCache: totals.fromCache, bytesReadRaw: totals.bytesReadRaw });
      await model.close();
      await cache.close();
    }
    console.log(JSON.stringify(out));
  `;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: fileURLToPath(new URL('..', import.meta.url)) });
  expect(result.stderr).toBe('');
  return JSON.parse(result.stdout) as { fromCache: number; bytesReadRaw: number }[];
}

describe('revisions of one model in one cache', () => {
  it('built side by side, each load is served wholly from the cache, A B C then A B A', async () => {
    const { dir, cleanup } = await makeTempDir('splitzip-revisions-');
    cleanups.push(cleanup);
    const models = {
      A: await writeModel(join(dir, 'A'), revisionA(), SHARD_BYTES),
      B: await writeModel(join(dir, 'B'), revisionB(), SHARD_BYTES),
      C: await writeModel(join(dir, 'C'), revisionC(), SHARD_BYTES),
    };
    cleanups.push(() => models.A.close(), () => models.B.close(), () => models.C.close());
    expect(models.A.shards.map((s) => s.name)).toEqual(models.C.shards.map((s) => s.name));
    const cacheDir = join(dir, 'cache');
    for (const model of [models.A, models.B, models.C]) await buildCache(model, cacheDir, { sliceBindingsPerFile: true });
    for (const which of ['A', 'B', 'C', 'A', 'B', 'A'] as const) {
      const totals = await loadOnce(models[which], cacheDir);
      expect({ which, fromCache: totals.fromCache, bytesReadRaw: totals.bytesReadRaw, byReason: totals.byReason }).toMatchObject({
        which,
        fromCache: TENSOR_COUNT,
        bytesReadRaw: 0,
        byReason: { cached: TENSOR_COUNT, unchecked: 0, stale: 0, missing: 0 },
      });
    }
  });

  it('bindings of other copies: the first load of each file hashes and records it, every later load (ping-pong too) is served from the cache', async () => {
    const { dir, cleanup } = await makeTempDir('splitzip-revisions-');
    cleanups.push(cleanup);
    const models = {
      A: await writeModel(join(dir, 'A'), revisionA(), SHARD_BYTES),
      B: await writeModel(join(dir, 'B'), revisionB(), SHARD_BYTES),
      C: await writeModel(join(dir, 'C'), revisionC(), SHARD_BYTES),
    };
    cleanups.push(() => models.A.close(), () => models.B.close(), () => models.C.close());
    // B and C were built from copies (the same files written elsewhere: other inodes, other stamps) (another checkout, a download since replaced): their bindings
    // hold the copies' stamps, not those of the files loaded here.
    const cacheDir = join(dir, 'cache');
    await buildCache(models.A, cacheDir, { sliceBindingsPerFile: true });
    for (const which of ['B', 'C'] as const) {
      const copy = await writeModel(join(dir, `${which}-copy`), which === 'B' ? revisionB() : revisionC(), SHARD_BYTES);
      try {
        await buildCache(copy, cacheDir, { sliceBindingsPerFile: true });
      } finally {
        await copy.close();
      }
    }
    const seen = new Set<string>();
    for (const which of ['B', 'B', 'C', 'C', 'A', 'B', 'A', 'C'] as const) {
      const totals = await loadOnce(models[which], cacheDir);
      const first = !seen.has(which);
      seen.add(which);
      // Nothing stale or missing, ever: each file's bytes are one binding's entry.
      expect({ which, first, stale: totals.byReason.stale, missing: totals.byReason.missing, checkedOrCached: totals.byReason.cached + totals.byReason.unchecked }).toEqual({
        which,
        first,
        stale: 0,
        missing: 0,
        checkedOrCached: TENSOR_COUNT,
      });
      // After its first load a file is never read raw (so never hashed) again.
      if (!first) expect({ which, fromCache: totals.fromCache, bytesReadRaw: totals.bytesReadRaw }).toEqual({ which, fromCache: TENSOR_COUNT, bytesReadRaw: 0 });
    }
    // Another process (the built package): every revision from the cache, nothing read raw.
    expect(loadInChild(cacheDir, [join(dir, 'A'), join(dir, 'B'), join(dir, 'C')])).toEqual([0, 1, 2].map(() => ({ fromCache: TENSOR_COUNT, bytesReadRaw: 0 })));
  });

  it("entries of B held but not bound at its slices (the probe's B, 12 of 19): its first load binds each beside A's, later loads of B and A are served from the cache", async () => {
    const { dir, cleanup } = await makeTempDir('splitzip-revisions-');
    cleanups.push(cleanup);
    const A = await writeModel(join(dir, 'A'), revisionA(), SHARD_BYTES);
    const B = await writeModel(join(dir, 'B'), revisionB(), SHARD_BYTES);
    cleanups.push(() => A.close(), () => B.close());
    const cacheDir = join(dir, 'cache');
    await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
    // B's entries added, none of its slices bound (as `gc --model` of B leaves them).
    await buildCache(B, cacheDir, { sliceBindingsPerFile: true, noAlias: B.tensors.map((t) => t.name) });
    // A cache holding a second binding already (format 3): a load binds beside only in one (format-kept-by-loads.test.ts).
    await holdSecondBinding(cacheDir);
    expect(B.getTensor(name(2))!.slice).toEqual(A.getTensor(name(2))!.slice);
    const first = await loadOnce(B, cacheDir);
    expect(first.byReason.cached + first.byReason.unchecked + first.byReason.stale + first.byReason.missing).toBe(TENSOR_COUNT);
    for (const which of ['B', 'A', 'B', 'A'] as const) {
      const totals = await loadOnce(which === 'A' ? A : B, cacheDir);
      expect({ which, fromCache: totals.fromCache, bytesReadRaw: totals.bytesReadRaw }).toEqual({ which, fromCache: TENSOR_COUNT, bytesReadRaw: 0 });
    }
    // A's changed tensor's slice holds both files' bindings, each its own entry.
    const cache = await openShardCache(cacheDir);
    try {
      const slice = A.getTensor(name(2))!.slice;
      expect(new Set(cache.lookupSliceBindings!(slice.shardName, slice.offsetBytes, slice.sizeBytes).map((b) => b.entry.key)).size).toBe(2);
    } finally {
      await cache.close();
    }
  });

  it('a bare slice request of a slice with several bindings is SLICE_AMBIGUOUS; with one binding, or with the model, it is served', async () => {
    const { dir, cleanup } = await makeTempDir('splitzip-revisions-');
    cleanups.push(cleanup);
    const A = await writeModel(join(dir, 'A'), revisionA(), SHARD_BYTES);
    const C = await writeModel(join(dir, 'C'), revisionC(), SHARD_BYTES);
    cleanups.push(() => A.close(), () => C.close());
    const cacheDir = join(dir, 'cache');
    await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
    await buildCache(C, cacheDir, { sliceBindingsPerFile: true });
    const rawA = await readAllRaw(A);
    const cache = await openShardCache(cacheDir);
    cleanups.push(() => cache.close());
    const changed = A.getTensor(name(4))!.slice; // C changed it: bound to A's entry and to C's
    const kept = A.getTensor(name(5))!.slice; // the same bytes in both: one binding
    expect(cache.lookupSliceBindings?.(changed.shardName, changed.offsetBytes, changed.sizeBytes).length).toBe(2);
    const error = await loadTensor(changed, { cache, backend: 'cpu' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isRuntimeError(error, 'SLICE_AMBIGUOUS')).toBe(true);
    expect(error).toMatchObject({ details: { shardName: changed.shardName, offsetBytes: changed.offsetBytes, sizeBytes: changed.sizeBytes, bindings: 2 } });
    expect((error as Error).message).toMatch(/2 bindings/);
    expect((error as Error).message).toMatch(/model/);
    const one = await loadTensor(kept, { cache, backend: 'cpu' });
    expect(one.source).toBe('cache');
    expect(sameBytes(one.data, rawA.get(name(5))!)).toBe(true);
    const withModel = await loadTensor({ model: A, slice: changed }, { cache, backend: 'cpu' });
    expect(withModel.source).toBe('cache');
    expect(sameBytes(withModel.data, rawA.get(name(4))!)).toBe(true);
  });
});
