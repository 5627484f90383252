// addEntries with leaveTakenSlices: a slice another writer bound after the caller looked is left
// out of the add, for the caller to decide about (the builder's --rebind), instead of failing it.
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

describe('addEntries leaveTakenSlices', () => {
  it('adds the entry without a slice bound elsewhere meanwhile (slicesBound 0), keeps a free one, and without it fails SLICE_CONFLICT as before', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    try {
      const [first, second, third] = [makeTensor([40, 3], 9001), makeTensor([40, 3], 9002), makeTensor([40, 3], 9003)];
      const slice = ['model-00001.safetensors', 0, 240] as const;
      const other = ['model-00001.safetensors', 240, 240] as const;
      await store.addEntries([toInput(first!, 'a', [slice])]);
      // What a second build sees after its look found the slice free: another writer took it since.
      await expect(store.addEntries([toInput(second!, 'b', [slice])])).rejects.toMatchObject({ code: 'SLICE_CONFLICT' });
      const [result] = await store.addEntries([{ ...toInput(second!, 'b', [slice, other]), leaveTakenSlices: true }]);
      expect(result).toMatchObject({ added: true, slicesBound: 1 });
      expect(store.lookupBySlice(...slice)?.key).toBe(first!.key);
      expect(store.lookupBySlice(...other)?.key).toBe(second!.key);
      const [none] = await store.addEntries([{ ...toInput(third!, 'c', [slice]), leaveTakenSlices: true }]);
      expect(none).toMatchObject({ added: true, slicesBound: 0 });
      // The caller then decides about the slice, here by moving it.
      expect(await store.aliasSlices([{ key: third!.key, shardName: slice[0], offsetBytes: slice[1], sizeBytes: slice[2] }], { rebind: true })).toEqual([true]);
      expect(store.lookupBySlice(...slice)?.key).toBe(third!.key);
    } finally {
      await store.close();
    }
    // What was committed reads back the same from disk.
    const reopened = await openCacheStore(root);
    try {
      expect(reopened.lookupBySlice('model-00001.safetensors', 240, 240)?.key).toBe(makeTensor([40, 3], 9002).key);
      expect((await reopened.verify()).ok).toBe(true);
    } finally {
      await reopened.close();
    }
  });
});
