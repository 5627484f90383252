// Crash safety of dropUnboundEntries on a directory cache: the cache as a crash would leave it at
// each step (a copy taken there, the dead writer's lock left out as its recovery would), and a drop
// whose manifest write fails. Each copy opens, verifies, holds every bound entry with its bindings,
// and either every unbound entry or none; blobs of dropped entries left behind are orphans that gc
// removes, and a rerun drops what is left.
import { readdir, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore, StoreError } from '../src/index.js';
import { createCrashCopyBackend } from './crash-copies.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00001.safetensors';
const SETTINGS = { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false };

/** Two bound entries and two unbound ones, all in the journal of generation 1 (compactOnClose off). */
async function makeCache(): Promise<{ root: string; bound: TestTensor[]; unbound: TestTensor[] }> {
  const root = await makeTempDir();
  const tensors = Array.from({ length: 4 }, (_, i) => makeTensor([40, 6], 700 + i));
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  await store.addEntries([
    toInput(tensors[0]!, 'bound.0', [[SHARD, 0, 480]]),
    toInput(tensors[1]!, 'bound.1', [[SHARD, 480, 480], ['other.safetensors', 0, 480]]),
    toInput(tensors[2]!, 'unbound.2'),
    toInput(tensors[3]!, 'unbound.3'),
  ]);
  await store.close();
  return { root, bound: tensors.slice(0, 2), unbound: tensors.slice(2) };
}

/** Opens a crash copy: every bound entry with its bindings, verified, and the unbound ones all there or all gone. */
async function checkCrashCopy(copy: string, bound: readonly TestTensor[], unbound: readonly TestTensor[], step: string): Promise<'before' | 'after'> {
  const store = await openCacheStore(copy, { compactOnClose: false });
  try {
    for (const t of bound) expect(store.getEntry(t.key), `${step}: ${t.key}`).toBeDefined();
    expect(store.lookupBySlice(SHARD, 0, 480)?.key, step).toBe(bound[0]!.key);
    expect(store.lookupBySlice(SHARD, 480, 480)?.key, step).toBe(bound[1]!.key);
    expect(store.lookupBySlice('other.safetensors', 0, 480)?.key, step).toBe(bound[1]!.key);
    const report = await store.verify({ decode: true });
    expect(report.problems, step).toEqual([]);
    const present = unbound.filter((t) => store.getEntry(t.key) !== undefined).length;
    expect([0, unbound.length], step).toContain(present);
    return present === 0 ? 'after' : 'before';
  } finally {
    await store.close();
  }
}

it('a crash at any step of the drop leaves a cache that opens, verifies, keeps every bound entry, and holds every unbound entry or none; gc then removes the orphan blobs, and a rerun drops the rest', async () => {
  const { root, bound, unbound } = await makeCache();
  const { backend, copies } = createCrashCopyBackend(root);
  const store = await FsCacheStore.load(backend, SETTINGS);
  expect((await store.dropUnboundEntries()).count).toBe(2);
  await store.close();
  const [first, second] = unbound.map((t) => `blobs/${t.key.slice(0, 8)}`);
  expect(copies.map((c) => c.step)).toEqual([
    'before creating journal.2',
    'after creating journal.2',
    expect.stringMatching(/^before appending \d+ bytes to journal\.1$/),
    'after appending to journal.1',
    'before writing the manifest',
    'after writing the manifest',
    'before removing journal.1',
    'after removing journal.1',
    `before removing ${first}`,
    `after removing ${first}`,
    `before removing ${second}`,
    `after removing ${second}`,
  ]);
  const outcomes: string[] = [];
  for (const { step, path } of copies) {
    const outcome = await checkCrashCopy(path, bound, unbound, step);
    outcomes.push(outcome);
    // Blobs of dropped entries left by the crash are orphans: gc removes them (and finishes a sealed fold).
    const left = unbound.filter((t) => existsSync(join(path, 'blobs', `${t.key}.bin`))).map((t) => `blobs/${t.key}.bin`);
    const writer = await openCacheStore(path, { compactOnClose: false });
    const gc = await writer.gc();
    // Before the rename the blobs are the entries' (none is an orphan); after it, those not unlinked yet are.
    expect(gc.orphanBlobs.sort(), step).toEqual(outcome === 'before' ? [] : left.sort());
    const rerun = await writer.dropUnboundEntries();
    expect(rerun.count, step).toBe(outcome === 'before' ? 2 : 0);
    await writer.close();
    expect(await checkCrashCopy(path, bound, unbound, `${step}, rerun`)).toBe('after');
    const blobs = await readdir(join(path, 'blobs'));
    expect(blobs.sort(), step).toEqual(bound.map((t) => `${t.key}.bin`).sort());
    expect((await readdir(path)).filter((name) => name.startsWith('journal.')), step).toHaveLength(1);
    await rm(path, { recursive: true, force: true });
  }
  // Up to the manifest's rename the old state stands; from it on, the dropped one.
  expect(outcomes).toEqual(['before', 'before', 'before', 'before', 'before', ...Array(7).fill('after')]);
});

it('a drop whose manifest write fails keeps every entry and blob, in the handle and on disk; the drop can be run again', async () => {
  const { root, bound, unbound } = await makeCache();
  let failManifest = true;
  class FailingManifest extends FsBackend {
    override async writeManifest(bytes: Uint8Array): Promise<void> {
      if (failManifest) throw new StoreError('IO_ERROR', 'cannot write the manifest (a test fault)');
      return super.writeManifest(bytes);
    }
  }
  const store = await FsCacheStore.load(new FailingManifest(root), SETTINGS);
  const error = await catchError(() => store.dropUnboundEntries());
  expect(error.code).toBe('IO_ERROR');
  for (const t of unbound) {
    expect(store.getEntry(t.key)).toBeDefined();
    expect(existsSync(join(root, 'blobs', `${t.key}.bin`))).toBe(true);
  }
  expect(await checkCrashCopy(root, bound, unbound, 'after the failed write')).toBe('before');
  failManifest = false;
  expect((await store.dropUnboundEntries()).count).toBe(2);
  await store.close();
  expect(await checkCrashCopy(root, bound, unbound, 'after the rerun')).toBe('after');
});
