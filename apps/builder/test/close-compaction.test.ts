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
  // Ctrl-C while the closing fold waited for another writer's lock: every tensor was committed, yet
  // the build ended ABORTED with no report (build --json printed nothing); before the signal ended
  // lock waits, it waited the whole 30 s and failed LOCK_TIMEOUT.
  it('interrupted while its fold waits for another writer: INTERRUPTED with its report, the cache valid', { timeout: 30_000 }, async () => {
    const tensors = Array.from({ length: 2 }, (_, i) => gaussianBf16(`w.${i}.weight`, [64, 40 + i], 700 + i));
    const { indexPath } = await writeShardedTestModel(join(temp.path, 'model-locked'), tensors, 1_000_000);
    const cacheDir = join(temp.path, 'cache-locked');
    await buildCache({ model: indexPath, cacheDir, jobs: 0 });
    // A journal left unfolded (a close that failed), so that a build storing nothing folds it.
    const more = [gaussianBf16('w.9.weight', [32, 48], 709)];
    const second = await writeShardedTestModel(join(temp.path, 'model-locked-2'), more, 1_000_000);
    failing.manifestRenames = 1;
    await expect(buildCache({ model: second.indexPath, cacheDir, jobs: 0 })).rejects.toMatchObject({ code: 'IO_ERROR' });
    const { spawn } = await import('node:child_process');
    const { writeFile } = await import('node:fs/promises');
    const { hostname } = await import('node:os');
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      await writeFile(join(cacheDir, 'lock'), JSON.stringify({ pid: holder.pid, host: hostname(), bootId: null, startTicks: null, token: 'eeeeeeeeeeeeeeee', createdMs: Date.now() }));
      const controller = new AbortController();
      const build = buildCache({ model: second.indexPath, cacheDir, jobs: 0, signal: controller.signal });
      setTimeout(() => controller.abort(Object.assign(new Error('interrupted by SIGINT'), { signal: 'SIGINT' })), 500);
      await expect(build).rejects.toMatchObject({ code: 'INTERRUPTED', context: { report: { interrupted: true, encoded: 0 } } });
    } finally {
      holder.kill('SIGKILL');
    }
    const { unlink } = await import('node:fs/promises');
    await unlink(join(cacheDir, 'lock'));
    const store = await openCacheStore(cacheDir);
    expect(store.size).toBe(3);
    await store.close();
  });
});
