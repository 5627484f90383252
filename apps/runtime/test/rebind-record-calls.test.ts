// What a load's rebind record asks of the store: one aliasSlices call whose items carry the stale
// entry as `moveFrom` (the store moves the slice only from it), and no unbindSlices: before, the
// record unbound the slice (a manifest rewrite on a local cache) and then aliased it, and between
// the two, or after a failure between them, the slice was bound to nothing.
import { join } from 'node:path';
import { openSafetensorsModel, writeShardedModel } from '@splitzip/safetensors';
import { openCacheStore, type AliasSliceItem } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { wrapCacheStore } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, type FixtureTensor } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('rebind-record'));
});
afterAll(async () => {
  await cleanup?.();
});

/** a and b of one shape, c of another with their size: one shard. */
const A: FixtureTensor = { name: 'a.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 91) };
const B: FixtureTensor = { name: 'b.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 92) };
const C: FixtureTensor = { name: 'c.weight', dtype: 'BF16', shape: [32, 128], data: bf16Weights(4096, 93) };

describe('the rebind record of a moved tensor', () => {
  it('is one aliasSlices call with moveFrom set to the stale entry, no unbindSlices, and the slice is bound at every store call', async () => {
    const dir = join(root, 'swap');
    const cacheDir = join(dir, 'cache');
    await writeShardedModel(join(dir, 'base'), [A, B, C], { maxShardBytes: 1 << 20, shardNamePrefix: 'model' });
    const base = await openSafetensorsModel(join(dir, 'base'));
    const keys = await buildCache(base, cacheDir);
    await base.close();
    // b lands on a's old span and a on b's, each with the other's shape: both bindings stale.
    await writeShardedModel(join(dir, 'moved'), [B, A, C], { maxShardBytes: 1 << 20, shardNamePrefix: 'model' });
    const moved = await openSafetensorsModel(join(dir, 'moved'));
    const slices = new Map(moved.tensors.map((t) => [t.name, t.slice]));
    const observer = await openCacheStore(cacheDir);
    /** Each moved slice's binding as another process sees it. */
    const seen = async (): Promise<(string | undefined)[]> => {
      await observer.refresh();
      return ['a.weight', 'b.weight'].map((name) => {
        const slice = slices.get(name)!;
        return observer.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.key;
      });
    };
    // A handle keeping one binding per slice (a caller's store, as s3:// does): openShardCache opens
    // a local cache with one binding per file, which adds the moved file's binding beside the base's
    // (rebind-moved-tensors.test.ts), so no move is recorded there.
    const cache = wrapCacheStore(await openCacheStore(cacheDir, { compactOnClose: 'when-due' }));
    const calls: { method: string; items: unknown[]; before: (string | undefined)[]; after: (string | undefined)[] }[] = [];
    const aliasSlices = cache.store.aliasSlices.bind(cache.store);
    const unbindSlices = cache.store.unbindSlices.bind(cache.store);
    cache.store.aliasSlices = async (items, options) => {
      const before = await seen();
      const result = await aliasSlices(items, options);
      calls.push({ method: 'aliasSlices', items: [...items], before, after: await seen() });
      return result;
    };
    cache.store.unbindSlices = async (items) => {
      const before = await seen();
      const result = await unbindSlices(items);
      calls.push({ method: 'unbindSlices', items: [...items], before, after: await seen() });
      return result;
    };
    try {
      const load = loadModel(moved, cache, { backend: 'cpu' });
      await load.drain();
      expect(load.reports.filter((r) => r.reason === 'stale').map((r) => r.name).sort()).toEqual(['a.weight', 'b.weight']);
      expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 3, failed: 0 });
    } finally {
      await cache.close();
      await observer.close();
      await moved.close();
    }
    expect(calls.map((c) => c.method)).not.toContain('unbindSlices');
    const rebinds = calls.filter((c) => (c.items as AliasSliceItem[]).some((item) => item.moveFrom !== undefined && item.moveFrom !== item.key));
    expect(rebinds).toHaveLength(1);
    const [record] = rebinds;
    const bySlice = (name: string) => ({ shardName: slices.get(name)!.shardName, offsetBytes: slices.get(name)!.offsetBytes, sizeBytes: slices.get(name)!.sizeBytes });
    // a's span held b's entry, b's span a's: each moved to its own entry, from the other's.
    // The batch may carry c's checked stamp too (moveFrom its own key): the moves are the others.
    const items = [...(record!.items as AliasSliceItem[])].filter((item) => item.moveFrom !== item.key).sort((x, y) => (x.key === keys.get('a.weight') ? -1 : y.key === keys.get('a.weight') ? 1 : 0));
    expect(items).toEqual([
      expect.objectContaining({ key: keys.get('a.weight'), ...bySlice('a.weight'), moveFrom: keys.get('b.weight') }),
      expect.objectContaining({ key: keys.get('b.weight'), ...bySlice('b.weight'), moveFrom: keys.get('a.weight') }),
    ]);
    // Never unbound: before the record the stale entries, after it the tensors' own.
    for (const call of calls) {
      for (const key of [...call.before, ...call.after]) expect(key, call.method).toBeDefined();
    }
    expect(record!.before).toEqual([keys.get('b.weight'), keys.get('a.weight')]);
    expect(record!.after).toEqual([keys.get('a.weight'), keys.get('b.weight')]);
  });
});
