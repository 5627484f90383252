// parseManifest keeps one copy of what every binding repeats (StringPool): the stamp lists of a
// shard's bindings are one frozen array, and the values read back are those written.
import { afterAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { parseManifest, serializeManifest } from '../src/manifest-format.js';
import { StringPool } from '../src/string-pool.js';
import type { CacheEntry } from '../src/types.js';
import { withSliceKeys } from '../src/validate-entry.js';
import { makeCache, removeTempDirs } from './helpers.js';

afterAll(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const STAMPS = ['240:1733400000000000001:1733400000000000001:77', 'etag:"0123"'];

async function readEntries(count: number): Promise<CacheEntry[]> {
  const { root } = await makeCache(count);
  const store = await openCacheStore(root);
  const entries = [...store.entries()].sort((a, b) => a.qualname.localeCompare(b.qualname));
  await store.close();
  return entries;
}

describe('parseManifest string pool', () => {
  it('gives bindings with equal stamps one frozen stamp list, keeps distinct lists apart, and reads back what was written', async () => {
    const [a, b, c, d] = await readEntries(4);
    const written = [
      withSliceKeys(a!, [[SHARD, 0, 240, [...STAMPS]]]),
      withSliceKeys(b!, [[SHARD, 240, 240, [...STAMPS]], ['other.safetensors', 0, 240]]),
      // The same stamps in another order: another list.
      withSliceKeys(c!, [[SHARD, 480, 240, [STAMPS[1]!, STAMPS[0]!]]]),
      withSliceKeys(d!, [[SHARD, 720, 240]]),
    ];
    const header = { generation: 3, chunkSize: 64, coverageMin: 0.99 };
    const bytes = serializeManifest(written, header);
    const parsed = parseManifest(bytes, 'manifest.json');
    const read = written.map((entry) => parsed.state.entries.get(entry.key)!);

    expect(read).toEqual(written);
    expect(Buffer.from(serializeManifest(read, header)).equals(Buffer.from(bytes))).toBe(true);
    const stampsOf = (i: number, slice = 0) => read[i]!.sliceKeys[slice]![3];
    expect(stampsOf(0)).toBe(stampsOf(1)); // one array, not two equal ones
    expect(Object.isFrozen(stampsOf(0))).toBe(true);
    expect(stampsOf(2)).toEqual([STAMPS[1], STAMPS[0]]);
    expect(stampsOf(2)).not.toBe(stampsOf(0));
    expect(read[1]!.sliceKeys[1]).toEqual(['other.safetensors', 0, 240]);
    expect(read[3]!.sliceKeys[0]).toHaveLength(3);
  });

  it('gives entries with the same codebook one frozen codebook object, and keeps other codebooks apart', async () => {
    const [a, b, c] = await readEntries(3);
    const sameAsA = (entry: CacheEntry): CacheEntry => Object.freeze({ ...entry, codebook: { exponents: [...a!.codebook.exponents] } });
    const other = [...a!.codebook.exponents].reverse();
    const written = [a!, sameAsA(b!), Object.freeze({ ...c!, codebook: { exponents: other } })];
    const header = { generation: 3, chunkSize: 64, coverageMin: 0.99 };
    const parsed = parseManifest(serializeManifest(written, header), 'manifest.json');
    const read = written.map((entry) => parsed.state.entries.get(entry.key)!);

    expect(read).toEqual(written);
    expect(read[1]!.codebook).toBe(read[0]!.codebook);
    expect(read[2]!.codebook).not.toBe(read[0]!.codebook);
    expect(read[2]!.codebook.exponents).toEqual(other);
    expect(Object.isFrozen(read[0]!.codebook) && Object.isFrozen(read[0]!.codebook.exponents)).toBe(true);
  });

  it('tells stamp lists apart whose joined text would be the same without a separator', () => {
    const pool = new StringPool();
    const split = pool.internStamps(['ab', 'c']);
    expect(pool.internStamps(['a', 'bc'])).toEqual(['a', 'bc']);
    expect(pool.internStamps(['abc'])).toEqual(['abc']);
    expect(pool.internStamps(['ab', 'c'])).toBe(split);
    expect(pool.intern('x'.repeat(40))).toBe('x'.repeat(40));
  });
});
