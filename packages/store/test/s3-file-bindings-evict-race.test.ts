// An eviction past MAX_SLICE_BINDINGS (s3://, FILE-BINDINGS.md "Phase 2", Adding beside step 6)
// deletes only objects of the listing that judged it, each looked at first, and leaves a key bound
// again meanwhile. It listed the stamps afresh and deleted every one of the evicted key: another
// host binding that key again lost its new stamp (answered true), which then stood at the top with
// none, and every later beside add was SLICE_CONFLICT.
import { expect, it } from 'vitest';
import { MAX_SLICE_BINDINGS, openCacheStore } from '../src/index.js';
import { makeTensor, type TestTensor } from './helpers.js';
import { describeS3 } from './s3-helpers.js';
import { etag, openWithRevisions, SHARD, SLICE, useFileBindingsBucket } from './s3-file-bindings-fixture.js';

describeS3('S3 store: an eviction beside a re-bind of the evicted key', () => {
  const { bucket } = useFileBindingsBucket('evict-race');

  it('another host binds the evicted key again during the eviction: its new binding keeps its stamp; later beside adds go on', async () => {
    const url = `s3://${bucket}/e/`;
    const n = MAX_SLICE_BINDINGS + 2;
    const revs: TestTensor[] = Array.from({ length: n }, (_, i) => makeTensor([40, 6], 300 + i));
    const w1 = await openWithRevisions(url, revs);
    const w2 = await openCacheStore(url, { sliceBindingsPerFile: true });
    try {
      for (let i = 0; i < MAX_SLICE_BINDINGS; i++) expect(await w1.aliasSlices([{ key: revs[i]!.key, ...SLICE, stamp: etag(i) }])).toEqual([true]);
      // Before w1's first DELETE (the eviction of rev0), w2 binds rev0 again (another object holding its bytes).
      const transport = (w1 as unknown as { transport: { deleteObject(name: string, ...rest: unknown[]): Promise<unknown> } }).transport;
      const del = transport.deleteObject.bind(transport);
      let rebound: boolean[] | undefined;
      transport.deleteObject = async (name: string, ...rest: unknown[]) => {
        if (rebound === undefined) {
          await w2.refresh();
          rebound = await w2.aliasSlices([{ key: revs[0]!.key, ...SLICE, stamp: etag(99) }]);
        }
        return del(name, ...rest);
      };
      expect(await w1.aliasSlices([{ key: revs[MAX_SLICE_BINDINGS]!.key, ...SLICE, stamp: etag(MAX_SLICE_BINDINGS) }])).toEqual([true]);
      expect(rebound).toEqual([true]);
      const reader = await openCacheStore(url);
      expect(reader.lookupSliceBindings(SHARD, 0, 480)[0]?.entry.key).toBe(revs[0]!.key);
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(99))).toMatchObject({ entry: { key: revs[0]!.key } });
      expect(reader.lookupSliceBinding(SHARD, 0, 480, etag(99))?.stamps).toContain(etag(99));
      await reader.close();
      expect(await w2.aliasSlices([{ key: revs[n - 1]!.key, ...SLICE, stamp: etag(123) }])).toEqual([true]);
    } finally {
      await w2.close();
      await w1.close();
    }
  });
});
