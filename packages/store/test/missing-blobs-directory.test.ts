// A cache whose blobs/ directory is gone (removed by hand, left out of a copy): verify reported every
// blob missing and named `build --repair`, but every write of a blob failed ENOENT for good (its temp
// file goes into blobs/), so nothing could put them back. The directory is made again by the write.
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

it('blobs/ removed: verify reports every blob missing, repairBlob and addEntry make the directory again and write', async () => {
  const { root, tensors } = await makeCache(2);
  await rm(join(root, 'blobs'), { recursive: true });
  const store = await openCacheStore(root);
  try {
    const report = await store.verify();
    expect(report.problems.map((p) => p.code)).toEqual(['BLOB_MISSING', 'BLOB_MISSING']);
    expect(await store.repairBlob!(tensors[0]!.key, tensors[0]!.payload)).toBe(true);
    expect(await readdir(join(root, 'blobs'))).toEqual([`${tensors[0]!.key}.bin`]);
    const fresh = makeTensor([8, 8], 5150);
    expect((await store.addEntry(toInput(fresh, 'fresh'))).added).toBe(true);
    expect(await store.repairBlob!(tensors[1]!.key, tensors[1]!.payload)).toBe(true);
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await store.close();
  }
});
