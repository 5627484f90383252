// Crash safety of unbindSlices on a directory cache: the cache as a crash would leave it at each
// step of the prune's compaction (a copy taken there, the dead writer's lock left out as its
// recovery would), and a prune whose manifest write fails. Each opens, verifies, holds every entry
// and either every binding or none of those removed; the next writer finishes from there.
import { readdir, rm } from 'node:fs/promises';
import { afterEach, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore, StoreError, type CacheStore } from '../src/index.js';
import { createCrashCopyBackend } from './crash-copies.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const SETTINGS = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false };

/** Four entries bound at two slices each (SHARD at i*480, and a second shard), one more record in the journal. */
async function makeCache(): Promise<{ root: string; tensors: TestTensor[] }> {
  const root = await makeTempDir();
  const tensors = Array.from({ length: 4 }, (_, i) => makeTensor([40, 6], 300 + i));
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`, [[SHARD, i * 480, 480], ['other.safetensors', i * 480, 480]])));
  await store.close();
  return { root, tensors };
}

const REMOVED = [0, 1, 2].map((i) => `${SHARD}@${i * 480}`);

function bindings(store: CacheStore): string[] {
  const out: string[] = [];
  for (const entry of store.entries()) for (const [shard, offset] of entry.sliceKeys) out.push(`${shard}@${offset}`);
  return out.sort();
}

/** Opens a crash copy: every entry there, verified, and the removed bindings all there or all gone. */
async function checkCrashCopy(copy: string, tensors: readonly TestTensor[], step: string): Promise<'before' | 'after'> {
  const store = await openCacheStore(copy, { compactOnClose: false });
  try {
    for (const t of tensors) expect(store.getEntry(t.key), `${step}: ${t.key}`).toBeDefined();
    const report = await store.verify({ decode: true });
    expect(report.problems, step).toEqual([]);
    const present = bindings(store);
    const kept = REMOVED.filter((b) => present.includes(b));
    expect([0, REMOVED.length], `${step}: ${kept.join(', ')}`).toContain(kept.length);
    expect(present.filter((b) => !REMOVED.includes(b)).length, step).toBe(5);
    return kept.length === 0 ? 'after' : 'before';
  } finally {
    await store.close();
  }
}

it('a crash at any step of the prune leaves a cache that opens, verifies, loses no entry, and holds every binding or none of those removed; a writer then finishes, and a rerun prunes', async () => {
  const { root, tensors } = await makeCache();
  const { backend, copies } = createCrashCopyBackend(root);
  const store = await FsCacheStore.load(backend, SETTINGS);
  expect(await store.unbindSlices(REMOVED.map((_b, i) => ({ shardName: SHARD, offsetBytes: i * 480, sizeBytes: 480 })))).toBe(3);
  await store.close();
  // Every step of a compaction: the next journal, the seal, the manifest, the old journal's removal
  // (the cache is at generation 1, its journal holding the add's record: compactOnClose off).
  expect(copies.map((c) => c.step)).toEqual([
    'before creating journal.2',
    'after creating journal.2',
    expect.stringMatching(/^before appending \d+ bytes to journal\.1$/),
    'after appending to journal.1',
    'before writing the manifest',
    'after writing the manifest',
    'before removing journal.1',
    'after removing journal.1',
  ]);
  const outcomes: string[] = [];
  for (const { step, path } of copies) {
    outcomes.push(await checkCrashCopy(path, tensors, step));
    // The next writer (gc, which finishes a sealed journal's fold first) and a rerun of the prune.
    const writer = await openCacheStore(path, { compactOnClose: false });
    await writer.gc();
    expect(await writer.unbindSlices(REMOVED.map((_b, i) => ({ shardName: SHARD, offsetBytes: i * 480, sizeBytes: 480 })))).toBe(outcomes.at(-1) === 'before' ? 3 : 0);
    await writer.close();
    expect(await checkCrashCopy(path, tensors, `${step}, rerun`)).toBe('after');
    expect((await readdir(path)).filter((name) => name.startsWith('journal.'))).toHaveLength(1);
    await rm(path, { recursive: true, force: true });
  }
  // Up to the manifest's rename the old state stands; from it on, the pruned one.
  expect(outcomes).toEqual(['before', 'before', 'before', 'before', 'before', 'after', 'after', 'after']);
});

it('a prune whose manifest write fails keeps every binding, in the handle and on disk; the next writer finishes the sealed fold with them, and the prune can be run again', async () => {
  const { root, tensors } = await makeCache();
  let failManifest = true;
  class FailingManifest extends FsBackend {
    override async writeManifest(bytes: Uint8Array): Promise<void> {
      if (failManifest) throw new StoreError('IO_ERROR', 'cannot write the manifest (a test fault)');
      return super.writeManifest(bytes);
    }
  }
  const store = await FsCacheStore.load(new FailingManifest(root), SETTINGS);
  const items = REMOVED.map((_b, i) => ({ shardName: SHARD, offsetBytes: i * 480, sizeBytes: 480 }));
  const error = await catchError(() => store.unbindSlices(items));
  expect(error.code).toBe('IO_ERROR');
  // The handle serves the bindings still (its state is swapped only once the manifest is in place).
  expect(store.lookupBySlice(SHARD, 0, 480)?.key).toBe(tensors[0]!.key);
  expect(await checkCrashCopy(root, tensors, 'after the failed write')).toBe('before');
  failManifest = false;
  expect(await store.unbindSlices(items)).toBe(3);
  expect(store.lookupBySlice(SHARD, 0, 480)).toBeUndefined();
  await store.close();
  expect(await checkCrashCopy(root, tensors, 'after the rerun')).toBe('after');
});
