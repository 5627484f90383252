// A lock file that cannot be removed after a commit (an I/O error at unlink): the commit stands,
// and this process's next writer session breaks the abandoned lock at once instead of waiting
// lockTimeoutMs behind its own live pid. The file system's unlink is wrapped to fail on demand.
import { existsSync } from 'node:fs';
import type * as FsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

const failing = vi.hoisted(() => ({ lockUnlinks: 0 }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  return {
    ...actual,
    unlink: async (path: Parameters<typeof actual.unlink>[0]) => {
      if (failing.lockUnlinks > 0 && String(path).endsWith('/lock')) {
        failing.lockUnlinks--;
        throw Object.assign(new Error(`EIO: i/o error, unlink '${String(path)}'`), { code: 'EIO' });
      }
      return actual.unlink(path);
    },
  };
});

afterEach(removeTempDirs);

describe('a lock that cannot be released', () => {
  it('keeps the commit, and the next writer of this process does not wait behind it', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true, lockTimeoutMs: 5000 });
    try {
      const [a, b] = [makeTensor([64], 1), makeTensor([64], 2)];
      failing.lockUnlinks = 3; // every attempt of one release fails
      const [added] = await store.addEntries([toInput(a, 'a', [['s', 0, 128]])]);
      expect(added).toMatchObject({ key: a.key });
      expect(failing.lockUnlinks).toBe(0);
      expect(existsSync(join(root, 'lock'))).toBe(true);
      expect(store.getEntry(a.key)).toBeDefined();
      const t0 = performance.now();
      await store.addEntries([toInput(b, 'b', [['s', 128, 128]])]);
      expect(performance.now() - t0).toBeLessThan(2000);
      expect(store.getEntry(b.key)).toBeDefined();
    } finally {
      await store.close();
    }
    expect(existsSync(join(root, 'lock'))).toBe(false);
    const again = await openCacheStore(root);
    expect(again.size).toBe(2);
    await again.close();
  });

  it('retries a release that fails once: no lock is left behind', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    failing.lockUnlinks = 1;
    await store.addEntries([toInput(makeTensor([64], 3), 'c', [['s', 0, 128]])]);
    expect(existsSync(join(root, 'lock'))).toBe(false);
    await store.close();
  });
});
