// The store's writers refuse a cache whose blobs/ is a symbolic link (UNSAFE_BLOB_PATH: another
// cache's blobs would be replaced or removed through it), while reads go through the link. A load
// of a copy of the model (unchecked tensors) said "its stamp is being recorded with the binding for
// other processes" while every record failed, so every process checked every tensor again.
import { mkdir, rename, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, tunedWeights, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('linked-blobs-stamp'));
});
afterAll(async () => {
  await cleanup?.();
});

it('unchecked tensors of a cache whose blobs/ is a link are served right and say their stamps cannot be recorded', async () => {
  const tensors = tunedWeights(['a', 'b', 'c'], 41);
  const base = await writeModel(join(root, 'base'), tensors, 1 << 20, 'model');
  const cacheDir = join(root, 'cache');
  await buildCache(base, cacheDir);
  await base.close();
  // blobs/ moved to "another disk" and linked back: reads go through, writes are refused.
  await mkdir(join(root, 'elsewhere'));
  await rename(join(cacheDir, 'blobs'), join(root, 'elsewhere', 'blobs'));
  await symlink(join(root, 'elsewhere', 'blobs'), join(cacheDir, 'blobs'));
  const copy = await writeModel(join(root, 'copy'), tensors, 1 << 20, 'model');
  const raw = await readAllRaw(copy);
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(copy, cache, { backend: 'cpu' });
    let count = 0;
    for await (const tensor of load) {
      expect(sameBytes(tensor.data, raw.get(tensor.name)!), tensor.name).toBe(true);
      count++;
    }
    expect(count).toBe(tensors.length);
    const unchecked = load.reports.filter((report) => report.reason === 'unchecked');
    expect(unchecked.length).toBe(tensors.length);
    for (const report of unchecked) {
      expect(report.detail).toContain('its stamp cannot be recorded: this process cannot write the cache (its blobs/ is a symbolic link');
      expect(report.detail).toContain('link the whole cache directory instead of its blobs/, or copy the blobs into a blobs/ of its own; then one load or a build of this model records it');
      expect(report.detail).not.toContain('being recorded');
      expect(report.detail).not.toContain('with write access');
    }
  } finally {
    await cache.close();
    await copy.close();
  }
});
