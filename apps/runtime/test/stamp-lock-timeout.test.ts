// A copied model's tensors are checked and their file stamps recorded in the background; when
// another live process holds the cache's writer lock, the records time out. The flush must wait
// for the lock once (the store's lockTimeoutMs), not once per batch of records.
import { writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '@splitzip/store';
import { loadTensor } from '../src/load-tensor.js';
import { wrapCacheStore } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, tunedWeights, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('stamp-lock'));
});
afterAll(async () => {
  await cleanup?.();
});

/** The store's writer lock, held by a live process (this one's parent) as far as any writer can tell. */
async function holdLockElsewhere(cacheDir: string): Promise<void> {
  await writeFile(
    join(cacheDir, 'lock'),
    JSON.stringify({ pid: process.ppid, host: hostname(), bootId: null, startTicks: null, token: '0123456789abcdef', createdMs: Date.now() }),
  );
}

describe('stamp records behind a writer lock another process holds', () => {
  it('a second batch queued while the first waits fails at once with its LOCK_TIMEOUT, without waiting for the lock again', async () => {
    const tensors = tunedWeights(['a', 'b', 'c'], 61);
    const built = await writeModel(join(root, 'model'), tensors, 1 << 20);
    const cacheDir = join(root, 'cache');
    await buildCache(built, cacheDir);
    await built.close();
    // The same bytes in other files: a copy, whose stamps no binding records (every tensor unchecked).
    const copy = await writeModel(join(root, 'copy'), tensors, 1 << 20);
    const store = await openCacheStore(cacheDir, { lockTimeoutMs: 1500, compactOnClose: false });
    let aliasCalls = 0;
    // The store, counting the record calls that reach it (each one waits for the lock).
    const counted = new Proxy(store, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (property === 'aliasSlices') {
          return (...args: Parameters<CacheStore['aliasSlices']>) => {
            aliasCalls += 1;
            return target.aliasSlices(...args);
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const cache = wrapCacheStore(counted);
    try {
      await holdLockElsewhere(cacheDir);
      // The first check's record starts a flush, which waits for the lock; the second check's
      // record is queued behind it, as the later checks of a load are.
      expect((await loadTensor({ model: copy, name: 'a.weight' }, { cache })).report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      await new Promise((resolve) => setImmediate(resolve));
      expect(aliasCalls).toBe(1);
      expect((await loadTensor({ model: copy, name: 'b.weight' }, { cache })).report).toMatchObject({ source: 'raw', reason: 'unchecked' });
      const stats = await cache.flushObjectStamps!();
      expect(stats).toMatchObject({ recorded: 0, failed: 2, lastError: { code: 'LOCK_TIMEOUT' } });
      // One wait for the lock: the second batch never asked the store.
      expect(aliasCalls).toBe(1);
    } finally {
      await cache.close();
      await copy.close();
    }
  });
});
