// CacheStore.holdsSeveralBindings: whether some slice holds a second binding (one per file), what
// takes a directory cache to manifest format 3 (releases before 0.56 refuse it). A loader asks it
// before binding a file beside another's, so that a load never moves a cache to that format.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';
import { fileStamp } from './unbound-cache.js';

afterEach(removeTempDirs);

const SLICE = { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 0, sizeBytes: 480 };

async function manifestFormat(root: string): Promise<number> {
  return (JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { format: number }).format;
}

it('false with one binding a slice, true once a second is bound beside it (in this handle, another, and after compaction), false again once it is unbound', async () => {
  const root = await makeTempDir();
  const [a, b] = [makeTensor([40, 6], 100), makeTensor([40, 6], 101)];
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
  try {
    await store.addEntries([toInput(a, 'w'), toInput(b, 'w')]);
    expect(store.holdsSeveralBindings).toBe(false);
    await store.aliasSlices([{ key: a.key, ...SLICE, stamp: fileStamp(1) }]);
    expect(store.holdsSeveralBindings).toBe(false);
    await store.aliasSlices([{ key: b.key, ...SLICE, stamp: fileStamp(2) }]);
    expect(store.holdsSeveralBindings).toBe(true);
  } finally {
    await store.close();
  }
  const reader = await openCacheStore(root);
  try {
    expect(reader.holdsSeveralBindings).toBe(true);
    await reader.compact();
  } finally {
    await reader.close();
  }
  expect(await manifestFormat(root)).toBe(3);
  const again = await openCacheStore(root, { sliceBindingsPerFile: true });
  try {
    expect(again.holdsSeveralBindings).toBe(true);
    expect(await again.unbindSlices([{ ...SLICE, key: a.key }])).toBe(1);
    expect(again.holdsSeveralBindings).toBe(false);
  } finally {
    await again.close();
  }
});
