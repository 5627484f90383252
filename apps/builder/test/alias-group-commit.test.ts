// A build of tensors whose entries are cached already (identical tensors of one model, or a second
// model sharing another's) only aliases their slices. Each alias was awaited on its own: identical
// tensors each waited for the one before them to commit (one journal record and fsync per tensor:
// 8,000 tensors of 2 distinct values took 21-35 s), and tensors of other cached entries held a
// MAX_TENSORS_IN_FLIGHT slot until their commit (~16 per record). Here the store's aliasSlices is
// held until enough calls are waiting (or a short while has passed), so the test sees how many
// aliases the build has in flight at once, and the journal's records once they are released.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openSafetensorsModel } from '@splitzip/safetensors';
import type * as Store from '@splitzip/store';
import { buildCache, MAX_TENSORS_IN_FLIGHT } from '../src/build-cache.js';
import { copyTensor, createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';

const gate = vi.hoisted(() => ({
  /** Held calls are released once this many wait, or RELEASE_AFTER_MS after the first of them came. */
  releaseAt: 0,
  waiting: [] as (() => void)[],
  timer: undefined as NodeJS.Timeout | undefined,
  maxWaiting: 0,
  /** Called once, before the first release. */
  onFirstRelease: undefined as (() => void) | undefined,
  /** Journal records found when the build closes its store (before the close folds them). */
  journalRecords: -1,
}));
// Only for a last group smaller than releaseAt: the calls of a full group come within ~40 ms here,
// and a release before they all came would fail the counts below, so this is far above that even on
// a loaded CI machine (at 3 ms the first test saw 28 and 14 waiting). Each test waits for it about once.
const RELEASE_AFTER_MS = 2000;

function releaseAll(): void {
  const first = gate.onFirstRelease;
  gate.onFirstRelease = undefined;
  first?.();
  clearTimeout(gate.timer);
  gate.timer = undefined;
  for (const release of gate.waiting.splice(0)) release();
}

/** Records in the journal of `generation` (12-byte headers: magic, body length, CRC). */
async function countJournalRecords(root: string, generation: number): Promise<number> {
  const bytes = await readFile(join(root, `journal.${generation}`));
  let records = 0;
  for (let at = 16; at + 12 <= bytes.length && bytes.readUInt32LE(at) === 0x524a5a53; at += 12 + bytes.readUInt32LE(at + 4)) records++;
  return records;
}

vi.mock('@splitzip/store', async (importOriginal) => {
  const { mockStoreModule } = await import('./helpers/intercept-store.js');
  return mockStoreModule(await importOriginal<typeof Store>(), (property, target) => {
    if (property === 'aliasSlices' && gate.releaseAt > 0) {
      return async (...call: Parameters<Store.CacheStore['aliasSlices']>) => {
        await new Promise<void>((resolve) => {
          gate.waiting.push(resolve);
          gate.maxWaiting = Math.max(gate.maxWaiting, gate.waiting.length);
          if (gate.waiting.length >= gate.releaseAt) releaseAll();
          else gate.timer ??= setTimeout(releaseAll, RELEASE_AFTER_MS);
        });
        return target.aliasSlices(...call);
      };
    }
    if (property === 'close' && gate.releaseAt > 0) {
      return async () => {
        gate.journalRecords = await countJournalRecords(target.root, target.generation);
        return target.close();
      };
    }
    return undefined;
  });
});

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

async function buildGated(model: string, cacheDir: string, releaseAt: number, signal?: AbortSignal): Promise<Awaited<ReturnType<typeof buildCache>>> {
  Object.assign(gate, { releaseAt, maxWaiting: 0, journalRecords: -1 });
  try {
    return await buildCache({ model, cacheDir, jobs: 0, ...(signal ? { signal } : {}) });
  } finally {
    gate.releaseAt = 0;
    gate.onFirstRelease = undefined;
    releaseAll();
  }
}

/** Models A and B: the same tensors under other shard names (B's entries all cached once A is built). */
async function writeSharedModels(name: string, count: number): Promise<{ a: string; b: string }> {
  const tensors = Array.from({ length: count }, (_, i) => gaussianBf16(`layers.${i}.weight`, [64, 64], 1000 + i));
  const a = await writeShardedTestModel(join(temp.path, `${name}-a`), tensors, 1_000_000, 'model-a');
  const b = await writeShardedTestModel(join(temp.path, `${name}-b`), tensors, 1_000_000, 'model-b');
  return { a: a.indexPath, b: b.indexPath };
}

describe('aliases of cached entries are committed together', () => {
  it('identical tensors do not wait for each other’s alias: far fewer journal records than tensors', { timeout: 60_000 }, async () => {
    const count = 48;
    const first = gaussianBf16('layers.0.weight', [64, 64], 901);
    const tensors = Array.from({ length: count }, (_, i) => copyTensor(`layers.${i}.weight`, first));
    const { indexPath } = await writeShardedTestModel(join(temp.path, 'identical'), tensors, 1_000_000);
    const cacheDir = join(temp.path, 'cache-identical');
    const report = await buildGated(indexPath, cacheDir, 8);
    // One at a time before: each identical tensor waited for the one before it to commit.
    expect(gate.maxWaiting).toBe(8);
    // The entry with its first slice, then the aliases 8 (or what is left) at a time: was one each.
    expect(gate.journalRecords).toBeGreaterThan(0);
    expect(gate.journalRecords).toBeLessThanOrEqual(count / 4);
    expect(report).toMatchObject({ encoded: 1, cached: count - 1, aliased: count, unaliased: 0 });
    const { openCacheStore } = await vi.importActual<typeof Store>('@splitzip/store');
    const store = await openCacheStore(cacheDir);
    try {
      for (const tensor of report.tensors) expect(store.lookupBySlice(tensor.shard, tensor.offsetBytes, tensor.sizeBytes)?.key).toBe(tensor.key);
    } finally {
      await store.close();
    }
  });

  it('tensors waiting only for their alias leave the in-flight limit: more aliases in flight than MAX_TENSORS_IN_FLIGHT', { timeout: 60_000 }, async () => {
    const count = 3 * MAX_TENSORS_IN_FLIGHT;
    const { a, b } = await writeSharedModels('shared', count);
    const cacheDir = join(temp.path, 'cache-shared');
    await buildCache({ model: a, cacheDir, jobs: 0 });
    const releaseAt = MAX_TENSORS_IN_FLIGHT + 8;
    const report = await buildGated(b, cacheDir, releaseAt);
    expect(gate.maxWaiting).toBe(releaseAt);
    expect(gate.journalRecords).toBeLessThanOrEqual(Math.ceil(count / releaseAt) + 1);
    expect(report).toMatchObject({ encoded: 0, cached: count, aliased: count, unaliased: 0 });
  });

  it('Ctrl-C with aliases in flight: they commit, the report lists exactly the tensors bound, a re-run binds the rest', { timeout: 60_000 }, async () => {
    const count = 3 * MAX_TENSORS_IN_FLIGHT;
    const { a, b } = await writeSharedModels('interrupted', count);
    const cacheDir = join(temp.path, 'cache-interrupted');
    await buildCache({ model: a, cacheDir, jobs: 0 });
    const controller = new AbortController();
    gate.onFirstRelease = () => controller.abort(Object.assign(new Error('interrupted by SIGINT'), { signal: 'SIGINT' }));
    const failure = await buildGated(b, cacheDir, MAX_TENSORS_IN_FLIGHT + 8, controller.signal).then(
      () => undefined,
      (error: unknown) => error as { code: string; context: { report: Awaited<ReturnType<typeof buildCache>> } },
    );
    expect(failure?.code).toBe('INTERRUPTED');
    const partial = failure!.context.report;
    expect(partial).toMatchObject({ interrupted: true, encoded: 0 });
    expect(partial.tensors.length).toBeGreaterThan(0);
    expect(partial.tensors.length).toBeLessThan(count);
    expect(partial.aliased).toBe(partial.tensors.length);
    // Bound in the cache: exactly the tensors the report lists.
    const model = await openSafetensorsModel(b);
    const { openCacheStore } = await vi.importActual<typeof Store>('@splitzip/store');
    const store = await openCacheStore(cacheDir);
    try {
      const bound = model.tensors.filter(({ slice }) => store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes) !== undefined);
      expect(bound.map((t) => t.name).sort()).toEqual(partial.tensors.map((t) => t.name).sort());
    } finally {
      await store.close();
      await model.close();
    }
    const again = await buildCache({ model: b, cacheDir, jobs: 0 });
    expect(again).toMatchObject({ encoded: 0, cached: count, aliased: count - partial.tensors.length });
  });
});
