// SliceIndex keeps one owner per (shard, offset), which carries its slice's size, and a Map by size
// only where slices of two sizes start at one offset (a tensor and a view of its first bytes): that
// rare case must answer as the common one does.
import { afterAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { SliceIndex } from '../src/store-state.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterAll(removeTempDirs);

describe('SliceIndex', () => {
  it('tells apart slices of several sizes at one offset, and counts each once', () => {
    const index = new SliceIndex();
    index.set(['a.safetensors', 0, 240, ['s1']], 'k240');
    expect(index.get('a.safetensors', 0, 120)).toBeUndefined();
    index.set(['a.safetensors', 0, 120], 'k120');
    index.set(['a.safetensors', 0, 60, ['s3']], 'k60');
    index.set(['b.safetensors', 0, 240], 'other');
    expect(index.size).toBe(4);
    expect(index.get('a.safetensors', 0, 240)).toBe('k240');
    expect(index.getOwner('a.safetensors', 0, 240)?.stamps).toEqual(['s1']);
    expect(index.get('a.safetensors', 0, 120)).toBe('k120');
    expect(index.getOwner('a.safetensors', 0, 60)).toMatchObject({ key: 'k60', stamps: ['s3'] });
    expect(index.get('a.safetensors', 0, 30)).toBeUndefined();
    expect(index.get('b.safetensors', 0, 240)).toBe('other');
    expect(index.get('b.safetensors', 0, 120)).toBeUndefined();
    // Rebinding (another owner, new stamps) at a shared offset and at a single one: no new slice.
    index.set(['a.safetensors', 0, 120, ['s2']], 'k120b');
    index.set(['a.safetensors', 0, 240], 'k240b');
    index.set(['b.safetensors', 0, 240, ['s4']], 'other2');
    expect(index.size).toBe(4);
    expect(index.getOwner('a.safetensors', 0, 120)).toMatchObject({ key: 'k120b', stamps: ['s2'] });
    expect(index.getOwner('a.safetensors', 0, 240)).toMatchObject({ key: 'k240b', stamps: undefined });
    expect(index.get('a.safetensors', 0, 60)).toBe('k60');
    expect(index.getOwner('b.safetensors', 0, 240)).toMatchObject({ key: 'other2', stamps: ['s4'] });
  });

  it('a cache with two sizes bound at one offset of a shard serves both, from the journal and from the manifest', async () => {
    const root = await makeTempDir();
    const big = makeTensor([40, 3], 8101);
    const small = makeTensor([10, 6], 8102);
    const store = await openCacheStore(root, { create: true });
    await store.addEntries([toInput(big, 'big', [['s.safetensors', 4096, 240]]), toInput(small, 'small', [['s.safetensors', 4096, 120]])]);
    const reader = await openCacheStore(root, { compactOnClose: false });
    expect(reader.lookupBySlice('s.safetensors', 4096, 240)?.key).toBe(big.key);
    expect(reader.lookupBySlice('s.safetensors', 4096, 120)?.key).toBe(small.key);
    await reader.close();
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.lookupBySlice('s.safetensors', 4096, 240)?.key).toBe(big.key);
    expect(reopened.lookupBySlice('s.safetensors', 4096, 120)?.key).toBe(small.key);
    expect(reopened.lookupBySlice('s.safetensors', 4096, 60)).toBeUndefined();
    await reopened.close();
  });
});
