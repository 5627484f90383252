// A caller's slice stamps are checked element by element, holes included: Array.prototype.every
// skips an array's holes, so `new Array(1)` as stamps passed validation, the store wrote `undefined`
// as a stamp (null in the manifest), and the cache then failed to open (ENTRY_INVALID).
import { afterAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterAll(removeTempDirs);

describe('slice stamps with holes', () => {
  it('are refused (INVALID_ARGUMENT) and nothing is written: the cache opens as before', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const kept = makeTensor([40, 3], 8201);
    await store.addEntry(toInput(kept, 'kept', [['s.safetensors', 0, 240, ['240:1']]]));
    const holeOnly = new Array<string>(1);
    const holeAfter = Object.assign(new Array<string>(2), { 0: '240:2' });
    for (const [i, stamps] of [holeOnly, holeAfter].entries()) {
      const tensor = makeTensor([40, 3], 8210 + i);
      const error = await catchError(() => store.addEntry(toInput(tensor, `holey.${i}`, [['s.safetensors', 240 * (i + 1), 240, stamps]])));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(store.getEntry(tensor.key)).toBeUndefined();
    }
    await store.close();
    const reopened = await openCacheStore(root);
    expect([...reopened.entries()].map((entry) => entry.key)).toEqual([kept.key]);
    expect(reopened.lookupSliceBinding('s.safetensors', 0, 240)?.stamps).toEqual(['240:1']);
    await reopened.close();
  });

  it('sliceKeys with a hole, or not an array, are INVALID_ARGUMENT (a TypeError before)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([40, 3], 8220);
    for (const sliceKeys of [new Array(1), 'abc', { length: 1 }]) {
      const error = await catchError(() => store.addEntry({ ...toInput(tensor, 'holey'), sliceKeys: sliceKeys as never }));
      expect(error.code).toBe('INVALID_ARGUMENT');
    }
    expect(store.getEntry(tensor.key)).toBeUndefined();
    await store.close();
  });

  it('addEntries / aliasSlices items with a hole, or not objects, are INVALID_ARGUMENT naming the item (a hole came back as a hole, nothing done; null was a TypeError)', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const tensor = makeTensor([40, 3], 8230);
    const added = await store.addEntry(toInput(tensor, 'kept'));
    expect(added.added).toBe(true);
    const good = { key: tensor.key, shardName: 's.safetensors', offsetBytes: 0, sizeBytes: 240 };
    const calls: [string, () => Promise<unknown>][] = [
      ['addEntries', () => store.addEntries(new Array(1))],
      ['addEntries', () => store.addEntries([toInput(makeTensor([40, 3], 8231), 'other'), null as never])],
      ['aliasSlices', () => store.aliasSlices(new Array(1))],
      ['aliasSlices', () => store.aliasSlices([good, 7 as never])],
      ['aliasSlices', () => store.aliasSlices([null as never])],
    ];
    for (const [method, call] of calls) {
      const error = await catchError(call);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(new RegExp(`${method} item \\d must be`));
    }
    // Nothing of the refused calls was done: the good items beside the bad ones included.
    expect([...store.entries()].map((entry) => entry.key)).toEqual([tensor.key]);
    expect(store.lookupBySlice('s.safetensors', 0, 240)).toBeUndefined();
    await store.close();
  });
});
