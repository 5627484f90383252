// Crash safety of one binding per file (FILE-BINDINGS.md): the cache as a crash would leave it at
// each step of the commit that adds a slice's first second binding (a compaction to manifest 3 /
// journal 2) and of the one that adds a binding past MAX_SLICE_BINDINGS, dropping the least recent
// (one journal op). Each copy opens, verifies, and holds the bindings before the commit or after it.
import { afterEach, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { MAX_SLICE_BINDINGS, openCacheStore, type CacheStore } from '../src/index.js';
import { createCrashCopyBackend } from './crash-copies.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { fileStamp } from './unbound-cache.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
const SETTINGS = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false, sliceBindingsPerFile: true };

/** `count` entries, the first `bound` bound at SLICE (revision i+1's file stamp), compacted. */
async function makeCache(count: number, bound: number): Promise<{ root: string; tensors: TestTensor[] }> {
  const root = await makeTempDir();
  const tensors = Array.from({ length: count }, (_, i) => makeTensor([40, 6], 500 + i));
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
  await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`)));
  for (let i = 0; i < bound; i++) await store.aliasSlices([{ key: tensors[i]!.key, ...SLICE, stamp: fileStamp(i + 1) }]);
  await store.close();
  return { root, tensors };
}

function keysOf(store: CacheStore): string[] {
  return store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((b) => b.entry.key);
}

/** Opens each copy: it verifies, holds every entry, and its bindings are `before` or `after`; the next writer finishes from there. */
async function checkCopies(copies: { step: string; path: string }[], tensors: readonly TestTensor[], before: string[], after: string[]): Promise<string[]> {
  const outcomes: string[] = [];
  for (const { step, path } of copies) {
    const store = await openCacheStore(path, { compactOnClose: false });
    try {
      for (const t of tensors) expect(store.getEntry(t.key), `${step}: ${t.key}`).toBeDefined();
      expect((await store.verify({ decode: true })).problems, step).toEqual([]);
      const keys = keysOf(store);
      expect([JSON.stringify(before), JSON.stringify(after)], `${step}: ${keys.join(', ')}`).toContain(JSON.stringify(keys));
      outcomes.push(JSON.stringify(keys) === JSON.stringify(before) ? 'before' : 'after');
    } finally {
      await store.close();
    }
    const writer = await openCacheStore(path, { compactOnClose: false });
    await writer.gc();
    await writer.compact();
    await writer.close();
    const reopened = await openCacheStore(path);
    expect(keysOf(reopened), `${step}, after a writer`).toEqual(outcomes.at(-1) === 'before' ? before : after);
    await reopened.close();
  }
  return outcomes;
}

it('the first second binding (a compaction to manifest 3): a crash at any step leaves the bindings before or after it', async () => {
  const { root, tensors } = await makeCache(2, 1);
  const [a, b] = tensors as [TestTensor, TestTensor];
  const { backend, copies } = createCrashCopyBackend(root);
  const store = await FsCacheStore.load(backend, SETTINGS);
  expect(await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2) }])).toEqual([true]);
  await store.close();
  expect(copies.map((c) => c.step)).toContain('before writing the manifest');
  const outcomes = await checkCopies(copies, tensors, [a.key], [b.key, a.key]);
  expect(outcomes[0]).toBe('before');
  expect(outcomes.at(-1)).toBe('after');
});

it('a binding past MAX_SLICE_BINDINGS (one journal op adds it and drops the least recent): a crash at any step leaves one state or the other', async () => {
  const count = MAX_SLICE_BINDINGS + 1;
  const { root, tensors } = await makeCache(count, MAX_SLICE_BINDINGS);
  const { backend, copies } = createCrashCopyBackend(root);
  const store = await FsCacheStore.load(backend, SETTINGS);
  const dropped: string[] = [];
  await store.aliasSlices([{ key: tensors[count - 1]!.key, ...SLICE, stamp: fileStamp(count) }], { onBindingDropped: (_slice, key) => dropped.push(key) });
  await store.close();
  expect(dropped).toEqual([tensors[0]!.key]);
  expect(copies.map((c) => c.step)).toEqual([expect.stringMatching(/^before appending \d+ bytes to journal\.\d+$/), expect.stringMatching(/^after appending to journal\.\d+$/)]);
  const before = tensors.slice(0, MAX_SLICE_BINDINGS).map((t) => t.key).reverse();
  const after = [tensors[count - 1]!.key, ...before.slice(0, MAX_SLICE_BINDINGS - 1)];
  expect(await checkCopies(copies, tensors, before, after)).toEqual(['before', 'after']);
});
