// The build's last step folds the journal into the manifest (store.close): an I/O error there is
// the build's error (it was swallowed: exit 0 with the manifest not written). The file system's
// rename is wrapped to fail on demand; the build runs in this process (a small model: inline).
import type * as FsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openCacheStore } from '@splitzip/store';
import { buildCache } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';

const failing = vi.hoisted(() => ({ manifestRenames: 0 }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  return {
    ...actual,
    rename: async (from: Parameters<typeof actual.rename>[0], to: Parameters<typeof actual.rename>[1]) => {
      if (failing.manifestRenames > 0 && String(to).endsWith('manifest.json')) {
        failing.manifestRenames--;
        throw Object.assign(new Error(`EIO: i/o error, rename '${String(from)}' -> '${String(to)}'`), { code: 'EIO' });
      }
      return actual.rename(from, to);
    },
  };
});

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

describe('the compaction that closes a build', () => {
  it('fails the build when it cannot write the manifest; the cache stays valid and the next build finishes it', async () => {
    const tensors = Array.from({ length: 4 }, (_, i) => gaussianBf16(`layers.${i}.weight`, [64, 65 + i], 300 + i));
    const { indexPath } = await writeShardedTestModel(join(temp.path, 'model'), tensors, 1_000_000);
    const cacheDir = join(temp.path, 'cache');
    // The first build creates the cache (its first manifest) before the fault is armed.
    await buildCache({ model: indexPath, cacheDir, jobs: 0 });
    const more = Array.from({ length: 3 }, (_, i) => gaussianBf16(`extra.${i}.weight`, [32, 33 + i], 500 + i));
    const second = await writeShardedTestModel(join(temp.path, 'model2'), more, 1_000_000);
    failing.manifestRenames = 1;
    await expect(buildCache({ model: second.indexPath, cacheDir, jobs: 0 })).rejects.toMatchObject({
      code: 'IO_ERROR',
      message: expect.stringContaining('[EIO]'),
    });
    expect(failing.manifestRenames).toBe(0);
    // Committed in the journal: a reader sees every entry, and the next build writes nothing new.
    const store = await openCacheStore(cacheDir);
    expect(store.size).toBe(7);
    await store.close();
    const again = await buildCache({ model: second.indexPath, cacheDir, jobs: 0 });
    expect(again.encoded).toBe(0);
    // ...and that build, though it stores nothing, finishes the fold: manifest.json (what the seed's
    // readers read) holds every entry again (it kept the first build's 4).
    const { readFile } = await import('node:fs/promises');
    const manifest = JSON.parse(await readFile(join(cacheDir, 'manifest.json'), 'utf8')) as { entries: Record<string, unknown> };
    expect(Object.keys(manifest.entries)).toHaveLength(7);
  });
});
