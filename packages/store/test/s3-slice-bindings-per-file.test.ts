// sliceBindingsPerFile on an s3:// cache with file stamps: a file stamp stays this host's (never in
// the bucket), so a second file's stamp for another entry is SLICE_CONFLICT, one binding per slice
// (FILE-BINDINGS.md, "Phase 2: s3://", what stays one binding; object stamps: s3-file-bindings).
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
const fileStamp = (n: number): string => `9000:17334000000000000${10 + n}:17334000000000000${10 + n}:${100 + n}`;

describeS3('S3 store: sliceBindingsPerFile', () => {
  const bucket = uniqueBucket('per-file');
  const client = rawClient();
  useTestBucket(client, bucket);

  it('keeps one binding per slice for file stamps: SLICE_CONFLICT for another file', async () => {
    const [a, b] = [1, 2].map((seed) => makeTensor([40, 6], 900 + seed)) as [ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>];
    const store = await openCacheStore(`s3://${bucket}/c/`, { create: true, sliceBindingsPerFile: true });
    try {
      await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
      expect(await store.aliasSlices([{ key: a.key, ...SLICE, stamp: fileStamp(1) }])).toEqual([true]);
      expect((await catchError(() => store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2) }]))).code).toBe('SLICE_CONFLICT');
      expect(store.lookupSliceBindings(SHARD, 0, 480).map((binding) => binding.entry.key)).toEqual([a.key]);
      expect(store.lookupSliceBinding(SHARD, 0, 480, fileStamp(2))?.entry.key).toBe(a.key);
    } finally {
      await store.close();
    }
  });
});
