// A shard rewritten so that its tensors moved, one landing on another's old span with its shape: the
// slice's binding names the other tensor's entry, whose bytes it does not hold (`stale`). When its
// bytes are an entry of the tensor's own name, the load that finds it moves the binding there, only
// while the slice is still bound to the entry it judged; before, the tensor was served raw, and
// hashed once by every process, until a build with --rebind. A tied weight (bytes cached under
// another name) stays stale, and a cache this process cannot write is not written.
import { spawnSync } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openCacheStore } from '@splitzip/store';
import { openSafetensorsModel, writeShardedModel, type SafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openModel } from '../src/open-model.js';
import { openShardCache, wrapCacheStore, type ShardCache } from '../src/open-shard-cache.js';
import type { TensorReport } from '../src/types.js';
import { bf16Weights, buildCache, makeTempDir, objectSource, readAllRaw, sameBytes, type FixtureTensor } from './fixtures.js';
import { createBucket, damageCopy, describeS3, dropBucket, rawClient, uniqueBucket, uploadDirectory } from './helpers/s3.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';

/**
 * The stale remedy of a binding recorded only with other files of the shard name (the moved model
 * is another file than the one the cache was built from), on a local cache: a build binds this
 * file's tensors beside (one binding per file); until this release `--rebind`, and
 * `--rebind-other-files` for a skipped tensor.
 */
const OTHER_FILE_STALE =
  /: served raw; a build of this model binds this file's tensors beside the other files' bindings \(one binding per file: revisions of a model share the cache; a tensor that build skips[^)]*\)$/;

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('rebind-moved'));
});
afterAll(async () => {
  await chmod(join(root, 'read-only', 'cache'), 0o755).catch(() => undefined);
  await cleanup?.();
});

/** a and b of one shape, c of another with their size: one shard, a b c. */
const A: FixtureTensor = { name: 'a.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 61) };
const B: FixtureTensor = { name: 'b.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 62) };
const C: FixtureTensor = { name: 'c.weight', dtype: 'BF16', shape: [32, 128], data: bf16Weights(4096, 63) };

async function writeOne(dir: string, tensors: FixtureTensor[]): Promise<void> {
  await writeShardedModel(dir, tensors, { maxShardBytes: 1 << 20, shardNamePrefix: 'model' });
}

/**
 * The model a b c built into `<dir>/cache`, and its rewrite b a c at `<dir>/moved` (the same shard
 * name: b lands on a's old span, a on b's, both with the other's shape; c stays). Returns the
 * directories and the entries' keys by name.
 */
async function writeBuiltAndMoved(dir: string, cacheDir = join(dir, 'cache')): Promise<{ cacheDir: string; movedDir: string; keys: Map<string, string> }> {
  await writeOne(join(dir, 'base'), [A, B, C]);
  const base = await openSafetensorsModel(join(dir, 'base'));
  const keys = await buildCache(base, cacheDir);
  await writeOne(join(dir, 'moved'), [B, A, C]);
  const moved = await openSafetensorsModel(join(dir, 'moved'));
  expect(moved.getTensor('b.weight')!.slice).toEqual(base.getTensor('a.weight')!.slice);
  expect(moved.getTensor('a.weight')!.slice).toEqual(base.getTensor('b.weight')!.slice);
  await Promise.all([base.close(), moved.close()]);
  expect(keys.size).toBe(3);
  return { cacheDir, movedDir: join(dir, 'moved'), keys };
}

/**
 * The local cache as a caller's own store handle (wrapCacheStore over openCacheStore without
 * sliceBindingsPerFile): the one-binding-per-slice rules these tests pin, which s3:// caches and
 * such handles keep. openShardCache opens a local cache with one binding per file, where the
 * moved file's binding is added beside the base's instead (last test here; revisions-one-cache.test.ts).
 */
async function openOneBindingCache(cacheDir: string): Promise<ShardCache> {
  return wrapCacheStore(await openCacheStore(cacheDir, { compactOnClose: 'when-due' }));
}

/** One load of `model` through `cache`: every tensor bit-exact against the file; the reports by name. */
async function loadChecked(model: SafetensorsModel, cache: ShardCache): Promise<Map<string, TensorReport>> {
  const raw = await readAllRaw(model);
  const load = loadModel(model, cache, { backend: 'cpu' });
  for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
  return new Map(load.reports.map((report) => [report.name, report]));
}

/** The entry key each tensor's slice of `model` is bound to in the cache at `cacheDir`, by name. */
async function boundKeys(model: SafetensorsModel, cacheDir: string): Promise<Map<string, string | undefined>> {
  const store = await openCacheStore(cacheDir);
  try {
    return new Map(model.tensors.map((t) => [t.name, store.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.key]));
  } finally {
    await store.close();
  }
}

const BOUND_NOW = /holds other bytes than the entry its slice is bound to .*: served raw; its bytes are entry [0-9a-f]{40}'s, of this tensor's name, to which the slice is moved from entry [0-9a-f]{40} \(only while it is still bound to that one\): bound now: later loads through this cache handle serve it from the cache, and the binding is being recorded for other processes$/;

/**
 * A shift: a b built into `<dir>/cache`, then n a b written over the same shard name (n of their
 * shape, new bytes), the base's header padded to the same length so that a lands on b's old span
 * and b on a new one. Returns both models (the moved one local or through an object source), the
 * entries' keys by name and the cache directory.
 */
async function writeShift(dir: string, objects: boolean): Promise<{ base: SafetensorsModel; moved: SafetensorsModel; keys: Map<string, string>; cacheDir: string }> {
  const cacheDir = join(dir, 'cache');
  const N: FixtureTensor = { name: 'n.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 64) };
  await writeOne(join(dir, 'moved'), [N, A, B]);
  const moved = objects ? await openSafetensorsModel({ source: await objectSource(join(dir, 'moved'), '"shifted"') }) : await openSafetensorsModel(join(dir, 'moved'));
  // The base's header padded (its metadata) to the moved one's length, as a rewrite with a
  // fixed-size header leaves it.
  let base!: SafetensorsModel;
  for (let pad = 0; ; pad += 1) {
    await rm(join(dir, 'base'), { recursive: true, force: true });
    await writeShardedModel(join(dir, 'base'), [A, B], { maxShardBytes: 1 << 20, shardNamePrefix: 'model', shardMetadata: { pad: 'x'.repeat(pad) } });
    base = await openSafetensorsModel(join(dir, 'base'));
    if (base.getTensor('a.weight')!.slice.offsetBytes === moved.getTensor('n.weight')!.slice.offsetBytes) break;
    await base.close();
    expect(pad).toBeLessThan(256);
  }
  const keys = await buildCache(base, cacheDir);
  expect(moved.getTensor('a.weight')!.slice).toEqual(base.getTensor('b.weight')!.slice);
  return { base, moved, keys, cacheDir };
}

/** One load of only `name` of `model` through `cache`: bit-exact against the file; its report. */
async function loadOnly(model: SafetensorsModel, cache: ShardCache, name: string): Promise<TensorReport> {
  const raw = await readAllRaw(model);
  const load = loadModel(model, cache, { backend: 'cpu', filter: (t) => t.name === name });
  for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
  return load.reports.find((report) => report.name === name)!;
}

describe('a tensor moved onto a same-shape tensor\'s old span', () => {
  it('through openShardCache (one binding per file): the moved file\'s bindings are added beside the base\'s, nothing moved; fresh handles serve both models from the cache', async () => {
    const dir = join(root, 'swap-beside');
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(dir);
    await holdSecondBinding(cacheDir); // format 3 already: a load binds beside only then
    const [base, moved] = await Promise.all([openSafetensorsModel(join(dir, 'base')), openSafetensorsModel(movedDir)]);
    try {
      const first = await openShardCache(cacheDir);
      try {
        const reports = await loadChecked(moved, first);
        for (const name of ['a.weight', 'b.weight']) {
          expect(reports.get(name), name).toMatchObject({ source: 'raw', reason: 'stale' });
          expect(reports.get(name)!.detail, name).toContain(`its bytes are entry ${keys.get(name)}'s, of this tensor's name, to which this file's binding of the slice is added beside entry ${keys.get(name === 'a.weight' ? 'b.weight' : 'a.weight')}'s binding of other files`);
        }
        expect(await first.flushObjectStamps!()).toMatchObject({ recorded: 3, failed: 0 });
      } finally {
        await first.close();
      }
      for (const model of [moved, base, moved]) {
        const fresh = await openShardCache(cacheDir);
        try {
          const later = await loadChecked(model, fresh);
          for (const report of later.values()) expect(report, report.name).toMatchObject({ source: 'cache', reason: 'cached', digestMs: 0 });
        } finally {
          await fresh.close();
        }
      }
    } finally {
      await Promise.all([base.close(), moved.close()]);
    }
  });

  it('the first load serves it raw and rebinds its slice to its own entry; the next load through the handle, and a fresh handle once recorded, serve it from the cache', async () => {
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(join(root, 'swap'));
    const moved = await openSafetensorsModel(movedDir);
    const first = await openOneBindingCache(cacheDir);
    // The rebind record (items with moveFrom) held until the next load is done: that load is served by what the handle remembers.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const aliasSlices = first.store.aliasSlices.bind(first.store);
    first.store.aliasSlices = async (items, options) => {
      if (items.some((item) => item.moveFrom !== undefined && item.moveFrom !== item.key)) await held;
      return aliasSlices(items, options);
    };
    try {
      const reports = await loadChecked(moved, first);
      for (const name of ['a.weight', 'b.weight']) {
        expect(reports.get(name), name).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(reports.get(name)!.detail, name).toMatch(BOUND_NOW);
        expect(reports.get(name)!.detail).toContain(`its bytes are entry ${keys.get(name)}'s`);
        expect(reports.get(name)!.digestMs, name).toBeGreaterThan(0);
      }
      expect(reports.get('c.weight')).toMatchObject({ source: 'raw', reason: 'unchecked' });
      // Through the same handle at once, nothing hashed.
      const again = await loadChecked(moved, first);
      for (const report of again.values()) expect(report, report.name).toMatchObject({ source: 'cache', reason: 'cached', digestMs: 0 });
      expect((await boundKeys(moved, cacheDir)).get('b.weight')).toBe(keys.get('a.weight'));
      release();
      expect(await first.flushObjectStamps!()).toMatchObject({ recorded: 3, failed: 0 });
    } finally {
      release();
      await first.close();
    }
    expect(await boundKeys(moved, cacheDir)).toEqual(keys);
    // Another process: found by slice, its stamp recorded.
    const fresh = await openOneBindingCache(cacheDir);
    try {
      const later = await loadChecked(moved, fresh);
      for (const report of later.values()) expect(report, report.name).toMatchObject({ source: 'cache', reason: 'cached', digestMs: 0 });
    } finally {
      await fresh.close();
      await moved.close();
    }
  });

  it.each(['a local model', 'an object-store model (ETag stamps)'] as const)('a shift (a tensor inserted ahead), %s: the tensor landing on a new span, bound first by the handle and its record landed, does not stop the one behind it from moving', async (kind) => {
    const { base, moved, keys, cacheDir } = await writeShift(join(root, kind === 'a local model' ? 'shift' : 'shift-objects'), kind !== 'a local model');
    const cache = await openOneBindingCache(cacheDir);
    const only = (name: string) => loadOnly(moved, cache, name);
    try {
      // b first (its span was unbound: found by content key and bound), its record landed; then a,
      // whose span is still bound to b's entry. It was left stale: b's entry looked bound at b's own
      // span, as bytes another model shares there are (a whole load moved it when a was judged
      // before b's record landed: the outcome hung on timing).
      const b = await only('b.weight');
      expect(b).toMatchObject({ source: 'raw', reason: 'missing' });
      expect(b.detail).toContain('bound now');
      await cache.flushObjectStamps!();
      const a = await only('a.weight');
      expect(a).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(a.detail).toMatch(BOUND_NOW);
      expect(await cache.flushObjectStamps!()).toMatchObject({ failed: 0 });
    } finally {
      await cache.close();
    }
    const bound = await boundKeys(moved, cacheDir);
    expect([bound.get('a.weight'), bound.get('b.weight')]).toEqual([keys.get('a.weight'), keys.get('b.weight')]);
    const fresh = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(moved, fresh);
      for (const name of ['a.weight', 'b.weight']) expect(reports.get(name), name).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await fresh.close();
      await Promise.all([base.close(), moved.close()]);
    }
  });

  it('a shift whose entry is bound at more than MAX_BESIDE_SLICES (64) slices: no evidence kept, the tensor behind stays stale', async () => {
    const { base, moved, keys, cacheDir } = await writeShift(join(root, 'shift-wide'), false);
    const store = await openCacheStore(cacheDir);
    const b = keys.get('b.weight')!;
    const size = base.getTensor('b.weight')!.slice.sizeBytes;
    await store.aliasSlices(Array.from({ length: 64 }, (_, i) => ({ key: b, shardName: 'elsewhere.safetensors', offsetBytes: i * size, sizeBytes: size })));
    await store.close();
    const cache = await openOneBindingCache(cacheDir);
    try {
      expect(await loadOnly(moved, cache, 'b.weight')).toMatchObject({ reason: 'missing' });
      await cache.flushObjectStamps!();
      const a = await loadOnly(moved, cache, 'a.weight');
      expect(a).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(a.detail).toMatch(OTHER_FILE_STALE);
    } finally {
      await cache.close();
      await Promise.all([base.close(), moved.close()]);
    }
  });

  it("a binding the handle made before another model's build bound bytes it shares: no evidence of a move, the base's shared slice stays its own", async () => {
    const dir = join(root, 'shared-later');
    const cacheDir = join(dir, 'cache');
    // A base whose b equals its a, and a fine-tune of its layout with another b. The cache first
    // holds a renamed copy of the fine-tune (other shard names): the fine-tune's spans are unbound.
    const tuned = [A, { ...B, data: bf16Weights(4096, 81) }, C];
    await writeOne(join(dir, 'base'), [A, { ...B, data: A.data }, C]);
    await writeOne(join(dir, 'tuned'), tuned);
    await writeShardedModel(join(dir, 'renamed'), tuned, { maxShardBytes: 1 << 20, shardNamePrefix: 'other' });
    const renamed = await openSafetensorsModel(join(dir, 'renamed'));
    await buildCache(renamed, cacheDir);
    await renamed.close();
    const base = await openSafetensorsModel(join(dir, 'base'));
    const fine = await openSafetensorsModel(join(dir, 'tuned'));
    const cache = await openOneBindingCache(cacheDir);
    const only = loadOnly;
    try {
      // The handle finds the fine-tune's a unbound and binds it; then the base is built into the
      // cache (its a and b both to a's entry); then the handle loads the fine-tune's b.
      expect(await only(fine, cache, 'a.weight')).toMatchObject({ reason: 'missing' });
      await cache.flushObjectStamps!();
      const baseKeys = await buildCache(base, cacheDir, { rebind: true });
      expect(baseKeys.get('b.weight')).toBe(baseKeys.get('a.weight'));
      await cache.store.refresh();
      const b = await only(fine, cache, 'b.weight');
      expect(b).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(b.detail).toMatch(OTHER_FILE_STALE);
      await cache.flushObjectStamps!();
      expect((await boundKeys(base, cacheDir)).get('b.weight')).toBe(baseKeys.get('a.weight'));
      const fresh = await openOneBindingCache(cacheDir);
      try {
        expect(await only(base, fresh, 'b.weight')).toMatchObject({ source: 'cache', reason: 'cached' });
      } finally {
        await fresh.close();
      }
    } finally {
      await cache.close();
      await Promise.all([base.close(), fine.close()]);
    }
  });

  it('bytes cached under another name (a tied weight: a.weight holds b\'s bytes) stay stale, not rebound', async () => {
    const dir = join(root, 'tied');
    const { cacheDir, keys } = await writeBuiltAndMoved(dir);
    await writeOne(join(dir, 'tied'), [{ ...A, data: B.data }, B, C]);
    const tied = await openSafetensorsModel(join(dir, 'tied'));
    const cache = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(tied, cache);
      expect(reports.get('a.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(reports.get('a.weight')!.detail).toMatch(/holds other bytes than the entry its slice is bound to .*: served raw; /);
      expect(reports.get('a.weight')!.detail).toMatch(OTHER_FILE_STALE);
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 2, failed: 0 }); // b and c: their stamps
      const again = await loadChecked(tied, cache);
      expect(again.get('a.weight')).toMatchObject({ source: 'raw', reason: 'stale', digestMs: 0 });
    } finally {
      await cache.close();
    }
    expect((await boundKeys(tied, cacheDir)).get('a.weight')).toBe(keys.get('a.weight'));
    await tied.close();
  });

  // A fine-tune and its base, of one layout, in one cache: each slice is bound to one revision's
  // entry of the tensor's own name. Moving it to the loaded revision's would make every load of
  // either one a hash and a rebind (the bindings flip back and forth).
  it('a slice bound to another revision of the tensor (an entry of its own name) stays stale, not rebound', async () => {
    const dir = join(root, 'revision');
    const cacheDir = join(dir, 'cache');
    await writeOne(join(dir, 'base'), [A, B, C]);
    const base = await openSafetensorsModel(join(dir, 'base'));
    const baseKeys = await buildCache(base, cacheDir);
    const tuned = [A, B, C].map((t, i) => ({ ...t, data: bf16Weights(4096, 71 + i) }));
    await writeOne(join(dir, 'tuned'), tuned);
    const fine = await openSafetensorsModel(join(dir, 'tuned'));
    // The fine-tune's entries are cached too (its slices left bound to the base's).
    const fineKeys = await buildCache(fine, cacheDir, { noAlias: tuned.map((t) => t.name) });
    const cache = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(fine, cache);
      for (const name of ['a.weight', 'b.weight', 'c.weight']) {
        expect(reports.get(name), name).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(reports.get(name)!.detail, name).toMatch(OTHER_FILE_STALE);
      }
      await cache.flushObjectStamps!();
    } finally {
      await cache.close();
    }
    expect(await boundKeys(fine, cacheDir)).toEqual(baseKeys);
    expect(new Set(fineKeys.values()).size).toBe(3);
    await Promise.all([base.close(), fine.close()]);
  });

  // One entry per distinct bytes, named after the first tensor stored: a base whose b equals its a
  // binds b's slice to the entry named a.weight. A fine-tune of its layout (its own b) took that as
  // a move, and moved the base's slice to its b for good (the base's loads then found it bound to an
  // entry of b's name: another revision, never moved back).
  it("a slice bound to another tensor's entry that still holds that tensor (shared bytes) is not taken by a fine-tune's load", async () => {
    const dir = join(root, 'dedup');
    const cacheDir = join(dir, 'cache');
    await writeOne(join(dir, 'base'), [A, { ...B, data: A.data }, C]);
    await writeOne(join(dir, 'tuned'), [A, { ...B, data: bf16Weights(4096, 81) }, C]);
    const base = await openSafetensorsModel(join(dir, 'base'));
    const fine = await openSafetensorsModel(join(dir, 'tuned'));
    await buildCache(fine, cacheDir);
    const baseKeys = await buildCache(base, cacheDir, { rebind: true });
    expect(baseKeys.get('b.weight')).toBe(baseKeys.get('a.weight'));
    const cache = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(fine, cache);
      expect(reports.get('b.weight')).toMatchObject({ source: 'raw', reason: 'stale' });
      expect(reports.get('b.weight')!.detail).toMatch(OTHER_FILE_STALE);
      await cache.flushObjectStamps!();
    } finally {
      await cache.close();
    }
    expect(await boundKeys(base, cacheDir)).toEqual(baseKeys);
    const again = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(base, again);
      expect(reports.get('b.weight')).toMatchObject({ source: 'cache', reason: 'cached' });
    } finally {
      await again.close();
      await Promise.all([base.close(), fine.close()]);
    }
  });

  it('a slice another writer rebound since the check is left to it: the record moves the slice only from the binding judged stale', async () => {
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(join(root, 'raced'));
    const moved = await openSafetensorsModel(movedDir);
    const raced = moved.getTensor('b.weight')!.slice; // a's old span
    const cache = await openOneBindingCache(cacheDir);
    // Another process binds a's old span to c's entry (its size) between this load's check and its
    // record: before the first store call the record makes, whichever it is.
    let raceRun = false;
    const race = async () => {
      if (raceRun) return;
      raceRun = true;
      const other = await openCacheStore(cacheDir);
      await other.aliasSlices([{ key: keys.get('c.weight')!, ...raced }], { rebind: true });
      await other.close();
    };
    const unbindSlices = cache.store.unbindSlices.bind(cache.store);
    const aliasSlices = cache.store.aliasSlices.bind(cache.store);
    cache.store.unbindSlices = async (items) => {
      await race();
      return unbindSlices(items);
    };
    cache.store.aliasSlices = async (items, options) => {
      await race();
      return aliasSlices(items, options);
    };
    try {
      const reports = await loadChecked(moved, cache);
      expect(reports.get('b.weight')!.detail).toMatch(BOUND_NOW);
      expect(await cache.flushObjectStamps!()).toMatchObject({ failed: 0 });
    } finally {
      await cache.close();
    }
    const bound = await boundKeys(moved, cacheDir);
    expect(bound.get('b.weight')).toBe(keys.get('c.weight'));
    expect(bound.get('a.weight')).toBe(keys.get('a.weight'));
    await moved.close();
  });

  it('a cache this process cannot write: nothing is tried, the stale report names the build that can', async () => {
    const dir = join(root, 'read-only');
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(dir);
    for (const path of [root, dir]) await chmod(path, 0o755);
    await chmod(cacheDir, 0o555);
    const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
    const script = `
      import { openSafetensorsModel } from '@splitzip/safetensors';
      import { loadModel, openShardCache } from ${JSON.stringify(entry)};
      const cache = await openShardCache(${JSON.stringify(cacheDir)});
      // A rebind tried: an unbind, or an alias item with moveFrom.
      let rebindsTried = 0;
      const unbindSlices = cache.store.unbindSlices.bind(cache.store);
      cache.store.unbindSlices = (items) => { rebindsTried += 1; return unbindSlices(items); };
      const aliasSlices = cache.store.aliasSlices.bind(cache.store);
      cache.store.aliasSlices = (items, options) => { rebindsTried += items.filter((item) => item.moveFrom !== undefined && item.moveFrom !== item.key).length; return aliasSlices(items, options); };
      const model = await openSafetensorsModel(${JSON.stringify(movedDir)});
      const seen = {};
      for (const label of ['first', 'again']) {
        const load = loadModel(model, cache, { backend: 'cpu' });
        await load.drain();
        seen[label] = Object.fromEntries(load.reports.map((r) => [r.name, { reason: r.reason, detail: r.detail, digestMs: r.digestMs }]));
      }
      seen.stats = await cache.flushObjectStamps();
      seen.rebindsTried = rebindsTried;
      console.log(JSON.stringify(seen));
      await model.close();
      await cache.close();
    `;
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000, cwd: fileURLToPath(new URL('..', import.meta.url)), ...asNobody });
    await chmod(cacheDir, 0o755);
    expect(result.stderr).toBe('');
    type Seen = Record<'first' | 'again', Record<string, { reason: string; detail: string; digestMs: number }>> & { stats: { failed: number }; rebindsTried: number };
    const seen = JSON.parse(result.stdout) as Seen;
    expect(seen.rebindsTried).toBe(0);
    expect(seen.stats.failed).toBe(1); // c.weight's stamp, as before: only a rebind is not tried
    for (const name of ['a.weight', 'b.weight']) {
      expect(seen.first[name]!.reason).toBe('stale');
      // openShardCache (the child's): a local cache keeps one binding per file, so a build binds this file's beside.
      expect(seen.first[name]!.detail).toMatch(/: served raw; a build of this model binds this file's tensors beside the other files' bindings \(one binding per file: revisions of a model share the cache; a tensor that build skips[^)]*\) where the cache can be written: this process cannot write this one \((EACCES|EROFS|EPERM)\)/);
      expect(seen.again[name]).toMatchObject({ reason: 'stale', digestMs: 0 });
    }
    const moved = await openSafetensorsModel(movedDir);
    const bound = await boundKeys(moved, cacheDir);
    await moved.close();
    expect(bound.get('b.weight')).toBe(keys.get('a.weight'));
  });

  it('an s3:// model (objects stamped by ETag): rebound with the object\'s stamp, a fresh handle serves it from the cache', async () => {
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(join(root, 'objects'));
    const remote = await openSafetensorsModel({ source: await objectSource(movedDir, '"moved"') });
    const first = await openOneBindingCache(cacheDir);
    try {
      const reports = await loadChecked(remote, first);
      for (const name of ['a.weight', 'b.weight']) expect(reports.get(name)!.detail, name).toMatch(BOUND_NOW);
      expect(await first.flushObjectStamps!()).toMatchObject({ recorded: 3, failed: 0 });
      const slice = remote.getTensor('b.weight')!.slice;
      expect(first.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toMatchObject({ entry: { key: keys.get('b.weight') }, stamps: ['etag:"moved"'] });
    } finally {
      await first.close();
    }
    const fresh = await openOneBindingCache(cacheDir);
    try {
      for (const report of (await loadChecked(remote, fresh)).values()) expect(report, report.name).toMatchObject({ source: 'cache', reason: 'cached', digestMs: 0 });
    } finally {
      await fresh.close();
      await remote.close();
    }
  });
});

describeS3('an s3:// cache', () => {
  const bucket = uniqueBucket('rebind-moved');
  const client = rawClient();
  beforeAll(async () => {
    await createBucket(client, bucket);
  });
  afterAll(async () => {
    await dropBucket(client, bucket);
    client.destroy();
  });

  /**
   * The model at `modelDir` uploaded under `prefix`, every tensor read raw once through
   * `readThroughDir` (no cache: nothing bound or moved), then a.weight's kept copy damaged as a GET
   * body damaged in transit would have been kept. Returns the model's URL and its tensors' bytes.
   */
  async function uploadWithDamagedCopy(modelDir: string, prefix: string, readThroughDir: string): Promise<{ modelUrl: string; truth: Map<string, Uint8Array> }> {
    await uploadDirectory(client, bucket, prefix, modelDir);
    const modelUrl = `s3://${bucket}/${prefix}`;
    const reader = await openModel(modelUrl, { readThroughDir });
    const truth = await readAllRaw(reader);
    await reader.close();
    await damageCopy(readThroughDir, truth.get('a.weight')!, (body) => (body[100]! ^= 0xff));
    return { modelUrl, truth };
  }

  it("an s3:// model's moved tensor whose kept copy was damaged: the second read's bytes, its own entry's, vouch for themselves; moved, not a failed load", async () => {
    const dir = join(root, 's3-moved-copy');
    const readThroughDir = await mkdtemp(join(tmpdir(), 'runtime-rebind-rt-'));
    const { cacheDir, movedDir, keys } = await writeBuiltAndMoved(dir);
    try {
      const { modelUrl, truth } = await uploadWithDamagedCopy(movedDir, 'moved/', readThroughDir);
      const cache = await openOneBindingCache(cacheDir);
      try {
        // The first read (the copy) is neither entry's; the second (fetched) is a.weight's own
        // entry, moved here. It failed the whole load: SHARD_READ_FAILED, neither read trusted.
        const load = loadModel(modelUrl, cache, { backend: 'cpu', modelS3: { readThroughDir } });
        for await (const tensor of load) expect(sameBytes(tensor.data, truth.get(tensor.name)!), tensor.name).toBe(true);
        const a = load.reports.find((report) => report.name === 'a.weight')!;
        expect(a).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(a.detail).toMatch(BOUND_NOW);
        expect(a.detail).toContain('its first read (a read-through copy, or a GET body damaged in transit) held yet other bytes: that copy was dropped');
        expect(a.detail).not.toContain('the same bytes fetched twice');
        expect(await cache.flushObjectStamps!()).toMatchObject({ failed: 0 });
      } finally {
        await cache.close();
      }
      const remote = await openModel(modelUrl, { readThroughDir });
      try {
        expect((await boundKeys(remote, cacheDir)).get('a.weight')).toBe(keys.get('a.weight'));
      } finally {
        await remote.close();
      }
    } finally {
      await rm(readThroughDir, { recursive: true, force: true });
    }
  });

  it("a damaged kept copy whose second read is another name's entry (a tied weight): no self-vouching, SHARD_READ_FAILED; the next load serves it stale", async () => {
    const dir = join(root, 's3-tied-copy');
    const readThroughDir = await mkdtemp(join(tmpdir(), 'runtime-rebind-rt-'));
    const cacheDir = join(dir, 'cache');
    // Built from a b c; the rewrite's a holds b's bytes (b itself other ones): its span is bound to
    // a's entry, and its bytes are b's entry, of another name, which could as well be another
    // range's bytes (a proxy answering the wrong one).
    await writeOne(join(dir, 'base'), [A, B, C]);
    const base = await openSafetensorsModel(join(dir, 'base'));
    await buildCache(base, cacheDir);
    await base.close();
    await writeOne(join(dir, 'tied'), [{ ...A, data: B.data }, { ...B, data: bf16Weights(4096, 91) }, C]);
    try {
      const { modelUrl, truth } = await uploadWithDamagedCopy(join(dir, 'tied'), 'tied/', readThroughDir);
      const cache = await openOneBindingCache(cacheDir);
      try {
        await expect(loadModel(modelUrl, cache, { backend: 'cpu', modelS3: { readThroughDir } }).drain()).rejects.toMatchObject({
          code: 'SHARD_READ_FAILED',
          details: { tensor: 'a.weight', retryable: true },
        });
        const load = loadModel(modelUrl, cache, { backend: 'cpu', modelS3: { readThroughDir } });
        for await (const tensor of load) expect(sameBytes(tensor.data, truth.get(tensor.name)!), tensor.name).toBe(true);
        const a = load.reports.find((report) => report.name === 'a.weight')!;
        expect(a).toMatchObject({ source: 'raw', reason: 'stale' });
        expect(a.detail).toMatch(/the same bytes fetched twice\): served raw; a build of this model with --rebind binds it$/);
      } finally {
        await cache.close();
      }
    } finally {
      await rm(readThroughDir, { recursive: true, force: true });
    }
  });

  it('a local moved model: rebound in the bucket (its file stamp kept for this host), a fresh handle of the host serves it from the cache', async () => {
    const dir = join(root, 's3-cache');
    const readThroughDir = await mkdtemp(join(tmpdir(), 'runtime-rebind-rt-'));
    const cacheUrl = `s3://${bucket}/cache`;
    const { movedDir, keys } = await writeBuiltAndMoved(dir, cacheUrl);
    const moved = await openSafetensorsModel(movedDir);
    try {
      const first = await openShardCache(cacheUrl, { readThroughDir });
      try {
        const reports = await loadChecked(moved, first);
        for (const name of ['a.weight', 'b.weight']) {
          expect(reports.get(name), name).toMatchObject({ source: 'raw', reason: 'stale' });
          expect(reports.get(name)!.detail, name).toMatch(/: bound now: later loads through this cache handle serve it from the cache, and the binding is being kept for this host/);
        }
        expect(await first.flushObjectStamps!()).toMatchObject({ recorded: 3, failed: 0 });
      } finally {
        await first.close();
      }
      const fresh = await openShardCache(cacheUrl, { readThroughDir });
      try {
        expect(new Map(moved.tensors.map((t) => [t.name, fresh.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.key]))).toEqual(keys);
        for (const report of (await loadChecked(moved, fresh)).values()) expect(report, report.name).toMatchObject({ source: 'cache', reason: 'cached', digestMs: 0 });
      } finally {
        await fresh.close();
      }
    } finally {
      await moved.close();
      await rm(readThroughDir, { recursive: true, force: true });
    }
  });
});

