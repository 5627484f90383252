// A BF16 tensor too small to shrink (a 512-value norm) that a default build cached, whose slice
// binding is gone while its entry stays (`splitzip gc --model` of another revision of the same shard
// names removes such bindings: the store's unbindSlices here). Until 2026-12-07 a load called it
// `no-gain` from its size alone ("a build without it caches them"), served it raw and never bound
// it again, while verify --model called it "in the cache by content key, but its slice not bound".
// Now it is looked up by content key as any other unbound tensor; only where no entry has its size
// (a cache built with --skip-no-gain) is it `no-gain` unhashed.
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';
import type { SafetensorsModel } from '@splitzip/safetensors';

const NORM = 'layers.0.norm.weight';
/** Same size as NORM, never cached: no entry holds it, and it would not shrink. */
const UNCACHED_NORM = 'layers.1.norm.weight';

const TENSORS: FixtureTensor[] = [
  { name: 'layers.0.attn.weight', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 1101) },
  { name: NORM, dtype: 'BF16', shape: [512], data: bf16Weights(512, 1102, 0) },
  { name: UNCACHED_NORM, dtype: 'BF16', shape: [512], data: bf16Weights(512, 1103, 0) },
];

/** The CPU decoder, counting the content keys the load asks it to hash (it leaves each to the caller). */
function countingBackend(): { backend: DecodeBackend; hashes: () => number } {
  const cpu = createCpuDecoder();
  let hashes = 0;
  const backend: DecodeBackend = {
    name: 'counting-cpu',
    decode: (payload, meta, out, options) => cpu.decode(payload, meta, out, options),
    hashContentKey: () => {
      hashes += 1;
      return undefined;
    },
  };
  return { backend, hashes: () => hashes };
}

let root: string;
let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let raw: Map<string, Uint8Array>;
let cacheDir: string;
let normKey: string;

beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('unbound-no-gain'));
  model = await writeModel(join(root, 'model'), TENSORS, 1 << 20);
  raw = await readAllRaw(model);
  cacheDir = join(root, 'cache');
  // As a default build caches a small tensor whose coverage passes; UNCACHED_NORM left out.
  const keys = await buildCache(model, cacheDir, { skip: [UNCACHED_NORM] });
  normKey = keys.get(NORM)!;
  expect(normKey).toMatch(/^[0-9a-f]{40}$/);
  // What `gc --model` of another revision does to it: the binding goes, the entry stays.
  const store = await openCacheStore(cacheDir);
  try {
    const slice = model.getTensor(NORM)!.slice;
    expect(await store.unbindSlices([{ ...slice, key: normKey }])).toBe(1);
    expect(store.getEntry(normKey)).toBeDefined();
  } finally {
    await store.close();
  }
});
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

describe('a tensor too small to shrink whose entry exists but whose slice is unbound', () => {
  it('cacheOnly: NOT_CACHED `missing` naming its entry (no raw bytes to check it by), not `no-gain`', async () => {
    const cache = await openShardCache(cacheDir);
    try {
      const error = await loadTensor({ model, name: NORM }, { cache, cacheOnly: true }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: NORM, reason: 'missing' } });
      expect((error as Error).message).toContain(`the cache holds entry ${normKey} of its name and shape`);
      expect((error as Error).message).toContain('a load without cacheOnly reads it raw, looks it up by content key and binds the slice');
      // Without the look-up (explainMisses: false) it is not in the cache as far as the load knows: `missing`, not `no-gain`.
      const unexplained = await loadTensor({ model, name: NORM }, { cache, explainMisses: false });
      expect(unexplained.report).toMatchObject({ source: 'raw', reason: 'missing' });
      expect(unexplained.report.detail).toMatch(/^no entry for this slice: it would not shrink: .*, but the cache holds entries of its size, one of which may be its bytes \(explainMisses looks it up by content key\)$/);
      expect(sameBytes(unexplained.data, raw.get(NORM)!)).toBe(true);
    } finally {
      await cache.close();
    }
  });

  it('a load hashes it once, finds its entry and binds the slice: the handle serves it from the cache at once, a new handle finds it bound', async () => {
    const first = await openShardCache(cacheDir);
    const { backend, hashes } = countingBackend();
    try {
      const load = loadModel(model, first, { backend, filter: (t) => t.name === NORM || t.name === UNCACHED_NORM });
      for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
      const byName = new Map(load.reports.map((report) => [report.name, report]));
      expect(byName.get(NORM)).toMatchObject({ source: 'raw', reason: 'missing' });
      expect(byName.get(NORM)!.detail).toMatch(new RegExp(`^entry ${normKey} \\(${NORM.replaceAll('.', '\\.')}\\) holds these bytes, but this slice was not bound to it .*: bound now: later loads through this cache handle serve it from the cache`));
      // No entry holds the other norm's bytes: `no-gain` still, once looked up.
      expect(byName.get(UNCACHED_NORM)).toMatchObject({ source: 'raw', reason: 'no-gain' });
      expect(byName.get(UNCACHED_NORM)!.detail).toMatch(/^would not shrink: its payload would be [\d,]+ bytes, not smaller than its 1,024 raw bytes; /);
      expect(hashes()).toBe(2);

      const again = await loadTensor({ model, name: NORM }, { cache: first, backend });
      expect(again).toMatchObject({ source: 'cache', reason: 'cached' });
      expect(sameBytes(again.data, raw.get(NORM)!)).toBe(true);
      expect((await first.flushObjectStamps!()).recorded).toBe(1);
    } finally {
      await first.close();
    }

    const second = await openShardCache(cacheDir);
    try {
      const { shardName, offsetBytes, sizeBytes } = model.getTensor(NORM)!.slice;
      expect(second.lookupBySlice(shardName, offsetBytes, sizeBytes)?.key).toBe(normKey);
      const counted = countingBackend();
      const later = await loadTensor({ model, name: NORM }, { cache: second, backend: counted.backend });
      expect(later).toMatchObject({ source: 'cache', reason: 'cached' });
      expect(sameBytes(later.data, raw.get(NORM)!)).toBe(true);
      expect(counted.hashes()).toBe(0);
      // cacheOnly serves it now.
      const only = await loadTensor({ model, name: NORM }, { cache: second, cacheOnly: true });
      expect(only).toMatchObject({ source: 'cache', reason: 'cached' });
      expect(sameBytes(only.data, raw.get(NORM)!)).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('where no entry has its size (a cache built with --skip-no-gain): `no-gain` unhashed, as before', async () => {
    const skipDir = join(root, 'skip-cache');
    await buildCache(model, skipDir, { skip: [NORM, UNCACHED_NORM] });
    const cache = await openShardCache(skipDir);
    const { backend, hashes } = countingBackend();
    try {
      for (const explainMisses of [true, false]) {
        const loaded = await loadTensor({ model, name: NORM }, { cache, backend, explainMisses });
        expect(loaded.report).toMatchObject({ source: 'raw', reason: 'no-gain' });
      }
      expect(hashes()).toBe(0);
      const error = await loadTensor({ model, name: NORM }, { cache, cacheOnly: true }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'NOT_CACHED', details: { reason: 'no-gain' } });
    } finally {
      await cache.close();
    }
  });
});
