// A loader that binds a slice or two does not rewrite the cache's whole manifest when it closes
// (compactOnClose 'when-due': at 64,000 entries that rewrite took 1.3 s and 150 MB per process);
// the bindings stay in the journal, durable, and every later handle sees them.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openCacheStore } from '@splitzip/store';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, tunedWeights, writeModel } from './fixtures.js';

it('the bindings a load learns are kept in the journal, not by a manifest rewrite at close', async () => {
  const temp = await makeTempDir('splitzip-close-');
  try {
    const model = await writeModel(join(temp.dir, 'model'), tunedWeights(['a', 'b', 'c'], 510));
    const cacheDir = join(temp.dir, 'cache');
    await buildCache(model, cacheDir, { noAlias: ['b.weight'] });
    const manifestBefore = await readFile(join(cacheDir, 'manifest.json'));
    const b = model.tensors.find((t) => t.name === 'b.weight')!;
    const raw = await readAllRaw(model);

    const cache = await openShardCache(cacheDir);
    const load = loadModel(model, cache, { backend: 'cpu' });
    const sources = new Map<string, string>();
    for await (const tensor of load) {
      expect(sameBytes(tensor.data, raw.get(tensor.name)!)).toBe(true);
      sources.set(tensor.name, tensor.source);
    }
    // b's slice is unbound: served raw, and bound once its bytes are found cached by content key.
    expect(sources).toEqual(new Map([['a.weight', 'cache'], ['b.weight', 'raw'], ['c.weight', 'cache']]));
    await cache.close();

    expect(await readFile(join(cacheDir, 'manifest.json'))).toEqual(manifestBefore);
    const store = await openCacheStore(cacheDir);
    try {
      // The load found b's bytes cached by content key and bound its slice (journalled).
      expect(store.lookupBySlice(b.slice.shardName, b.slice.offsetBytes, b.slice.sizeBytes)).toBeDefined();
    } finally {
      await store.close();
    }
    await model.close();
  } finally {
    await temp.cleanup();
  }
});
