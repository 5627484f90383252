// A cache entry whose payload no staging slot can hold (above MAX_SLOT_BYTES: another model's, or a
// damaged manifest's; here 19.6 GB with no blob) no longer decides the size of every pool: it made
// createStagingPool (and any loadModel whose model it belonged to) fail with INVALID_ARGUMENT.
import { addOversizedManifestEntry } from '@splitzip/test-support/fixtures';
import { expect, it } from 'vitest';
import { MAX_SLOT_BYTES } from '../src/create-staging-pool.js';
import { loadModel, openShardCache } from '../src/index.js';
import { openCachedModel } from './fixtures.js';

it('sizes staging pools without entries no slot can hold', async () => {
  const fixture = await openCachedModel('splitzip-oversized-');
  try {
    const cacheDir = `${fixture.dir}/cache`;
    const largest = fixture.cache.largestPayloadBytes();
    expect(largest).toBeGreaterThan(0);
    const { key, compBytes } = await addOversizedManifestEntry(cacheDir);
    expect(compBytes).toBeGreaterThan(MAX_SLOT_BYTES);
    const cache = await openShardCache(cacheDir);
    try {
      expect(cache.getEntry(key)?.compBytes).toBe(compBytes);
      expect(cache.largestPayloadBytes()).toBe(largest);
      expect(cache.createStagingPool({ slotCount: 1 }).slotBytes).toBeGreaterThanOrEqual(largest);
      let loaded = 0;
      for await (const tensor of loadModel(fixture.model, cache)) loaded += tensor.source === 'cache' ? 1 : 0;
      expect(loaded).toBeGreaterThan(0);
    } finally {
      await cache.close();
    }
  } finally {
    await fixture.close();
  }
});
