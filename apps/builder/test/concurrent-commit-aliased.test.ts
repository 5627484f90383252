// Two builds of models that share tensors, into one cache at once: when the other build commits a
// shared tensor's entry between this build's last look and its own commit, the store binds this
// build's (still free) slice in that commit. The report left those bindings out of `aliased`
// (found by the S3 probe: 27 of 33 reported). Here the other writer is a second store instance
// that commits each entry just before this build's commit reaches the store. A directory cache's
// store leaves such a slice to the builder's own alias call (counted all along); an s3:// cache's
// binds it in the commit.
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type * as Store from '@splitzip/store';
import { buildCache } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { describeS3, dropBucket, rawClient, uniqueBucket } from './helpers/s3.js';

const race = vi.hoisted(() => ({ armed: false, committedFirst: 0, withSlices: false }));

vi.mock('@splitzip/store', async (importOriginal) => {
  const actual = await importOriginal<typeof Store>();
  const commitFirst = async (root: string, inputs: readonly Store.AddEntryInput[]) => {
    const other = await actual.openCacheStore(root);
    try {
      for (const input of inputs) {
        const { key, qualname, payload, shape, dtype, sliceKeys } = input;
        // The other writer is another model (no slices of this one), or this same model (its slices too).
        const slices = race.withSlices && sliceKeys ? { sliceKeys } : {};
        if ((await other.addEntry({ key, qualname: `other/${qualname}`, payload, shape, dtype, ...slices })).added) race.committedFirst++;
      }
    } finally {
      await other.close();
    }
  };
  const { mockStoreModule } = await import('./helpers/intercept-store.js');
  return mockStoreModule(actual, (property, target) => {
    if (property === 'addEntries' && race.armed) {
      return async (inputs: Store.AddEntryInput[]) => {
        await commitFirst(target.root, inputs);
        return target.addEntries(inputs);
      };
    }
    if (property === 'addEntry' && race.armed) {
      return async (input: Store.AddEntryInput) => {
        await commitFirst(target.root, [input]);
        return target.addEntry(input);
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

async function buildRacing(cacheDir: string, withSlices: boolean): Promise<void> {
  const tensors = Array.from({ length: 3 }, (_, i) => gaussianBf16(`layers.${i}.weight`, [64, 70 + i], 700 + i));
  const { indexPath } = await writeShardedTestModel(join(temp.path, `model-${++models}`), tensors, 1_000_000);
  race.committedFirst = 0;
  race.withSlices = withSlices;
  // An empty cache first, so the other writer has one to open.
  const { openCacheStore } = await vi.importActual<typeof Store>('@splitzip/store');
  await (await openCacheStore(cacheDir, { create: true, ...(cacheDir.startsWith('s3://') ? { s3: { createBucket: true } } : {}) })).close();
  race.armed = true;
  const report = await buildCache({ model: indexPath, cacheDir, jobs: 0 }).finally(() => {
    race.armed = false;
  });
  expect(race.committedFirst).toBe(3);
  expect(report.tensors.map((t) => t.status)).toEqual(['cached', 'cached', 'cached']);
  expect(report.stored_bytes).toBe(0);
  // Bound by this build only where the other writer left the slices free.
  expect(report.aliased).toBe(withSlices ? 0 : 3);
  const store = await openCacheStore(cacheDir);
  try {
    for (const tensor of report.tensors) expect(store.lookupBySlice(tensor.shard, tensor.offsetBytes, tensor.sizeBytes)?.key).toBe(tensor.key);
  } finally {
    await store.close();
  }
}
let models = 0;

it('counts in `aliased` only the bindings this build made, when another writer beat it to the entries (directory cache)', async () => {
  await buildRacing(join(temp.path, 'cache-a'), false);
  await buildRacing(join(temp.path, 'cache-b'), true);
});

describeS3('the same race on an s3:// cache', () => {
  const bucket = uniqueBucket('race');
  afterAll(async () => {
    await dropBucket(rawClient(), bucket);
  });
  it('counts in `aliased` the slices the store bound in a commit another writer beat to the entries, and only those', async () => {
    await buildRacing(`s3://${bucket}/cache-a`, false);
    await buildRacing(`s3://${bucket}/cache-b`, true);
  }, 60_000);
});
