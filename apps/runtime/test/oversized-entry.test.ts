// A cache entry whose payload no staging slot can hold (above MAX_SLOT_BYTES: another model's, or a
// damaged manifest's; here 19.6 GB with no blob) no longer decides the size of every pool: it made
// createStagingPool (and any loadModel whose model it belonged to) fail with INVALID_ARGUMENT.
import { readFile, writeFile } from 'node:fs/promises';
import { computePayloadLayout, MAX_ELEMENT_COUNT } from '@splitzip/codec';
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
    const n = MAX_ELEMENT_COUNT;
    const compBytes = computePayloadLayout(n, n, 64).totalBytes;
    expect(compBytes).toBeGreaterThan(MAX_SLOT_BYTES);
    const key = 'b'.repeat(40);
    const manifest = JSON.parse(await readFile(`${cacheDir}/manifest.json`, 'utf8')) as { entries: Record<string, unknown> };
    manifest.entries[key] = {
      qualname: 'phantom',
      blob: `blobs/${key}.bin`,
      codebook: { exponents: [127] },
      meta: { version: 3, element_count: n, chunk_size: 64, chunk_count: Math.ceil(n / 64), escape_count: n, comp_bytes: compBytes, raw_bytes: 2 * n, checksum: 1 },
      raw_bytes: 2 * n,
      slice_keys: [],
      dtype: 'BF16',
      shape: [n],
      format_version: 3,
      comp_bytes: compBytes,
      blob_checksum: 'xxh32:00000001',
    };
    await writeFile(`${cacheDir}/manifest.json`, JSON.stringify(manifest));
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
