// A build that fails after committing part of its work says what it committed (error
// `committed`, and the message's "the cache changed before the failure" clause) whatever the
// failure: also a store error that passes through as it is (LOCK_TIMEOUT, S3_UNAVAILABLE, S3_ERROR:
// the CLI's code and class unchanged), and a fold that fails once every tensor is committed. Review
// of 7c7f822: only BuilderErrors carried it. The store's commits are wrapped to fail on demand.
import type * as Store from '@splitzip/store';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildCache } from '../src/build-cache.js';
import { describeError } from '../src/describe-error.js';
import { renderErrorJson } from '../src/render-error-json.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';

const fault = vi.hoisted(() => ({
  /** Commits (addEntry, aliasSlices) let through before the next one fails; -1: none fails. */
  commitsLeft: -1,
  /** The store error code a failing commit throws. */
  code: 'LOCK_TIMEOUT',
  /** The close (the journal's fold into the manifest) fails. */
  failClose: false,
}));

vi.mock('@splitzip/store', async (importOriginal) => {
  const actual = await importOriginal<typeof Store>();
  const fail = (): never => {
    throw new actual.StoreError(fault.code as Store.StoreErrorCode, `injected ${fault.code}`, { details: { injected: true } });
  };
  const wrap = (store: Store.CacheStore): Store.CacheStore =>
    new Proxy(store, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        if (prop === 'addEntry' || prop === 'aliasSlices') {
          return async (...args: unknown[]) => {
            if (fault.commitsLeft === 0) fail();
            if (fault.commitsLeft > 0) fault.commitsLeft--;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        if (prop === 'close' && fault.failClose) {
          return async () => {
            await target.close();
            fault.failClose = false;
            fail();
          };
        }
        return (value as (...a: unknown[]) => unknown).bind(target);
      },
    });
  return { ...actual, openCacheStore: async (...args: Parameters<typeof actual.openCacheStore>) => wrap(await actual.openCacheStore(...args)) };
});

const { openCacheStore, isStoreError } = await vi.importActual<typeof Store>('@splitzip/store');

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-failed-committed-');
});
afterAll(async () => temp?.cleanup());

async function countEntriesAndBindings(cacheDir: string): Promise<{ entries: number; bindings: number }> {
  const store = await openCacheStore(cacheDir);
  try {
    let entries = 0;
    let bindings = 0;
    for (const entry of store.entries()) {
      entries++;
      bindings += entry.sliceKeys.length;
    }
    return { entries, bindings };
  } finally {
    await store.close();
  }
}

async function writeModel(name: string): Promise<string> {
  return writeSingleFileModel(
    join(temp.path, `${name}.safetensors`),
    Array.from({ length: 6 }, (_, i) => gaussianBf16(`layers.${i}.weight`, [64, 64], 700 + i)),
  );
}

describe('a failed build says what it committed', () => {
  for (const code of ['LOCK_TIMEOUT', 'S3_UNAVAILABLE', 'S3_ERROR']) {
    it(`${code} after some commits: the store error, as it is, with committed`, async () => {
      const model = await writeModel(`model-${code}`);
      const cacheDir = join(temp.path, `cache-${code}`);
      fault.code = code;
      fault.commitsLeft = 3;
      let failure: unknown;
      try {
        await buildCache({ model, cacheDir, jobs: 0 });
      } catch (error) {
        failure = error;
      } finally {
        fault.commitsLeft = -1;
      }
      // The code and class a script branches on stay.
      expect(isStoreError(failure, code as Store.StoreErrorCode)).toBe(true);
      const committed = (failure as { details: { committed?: { entries: number; bindings: number; stampsAdded: number } } }).details.committed;
      const cache = await countEntriesAndBindings(cacheDir);
      expect(cache.entries).toBe(3);
      expect(committed).toMatchObject({ entries: cache.entries, bindings: cache.bindings, stampsAdded: 0, blobsRepaired: 0, bindingsRemoved: 0 });
      const line = describeError(failure);
      expect(line).toMatch(/; the cache changed before the failure: this build committed 3 new entries \([\d.]+ KiB\) and 3 new slice bindings, which stay in it$/);
      const json = JSON.parse(renderErrorJson(failure, line)) as { error: { code: string; committed?: unknown } };
      expect(json.error.code).toBe(code);
      expect(json.error.committed).toEqual(committed);
    });
  }

  it('a fold failing once every tensor is committed: its error carries committed too', async () => {
    const model = await writeModel('model-close');
    const cacheDir = join(temp.path, 'cache-close');
    fault.code = 'IO_ERROR';
    fault.failClose = true;
    let failure: unknown;
    try {
      await buildCache({ model, cacheDir, jobs: 0 });
    } catch (error) {
      failure = error;
    } finally {
      fault.failClose = false;
    }
    expect(isStoreError(failure, 'IO_ERROR')).toBe(true);
    expect((failure as { details: { committed?: unknown } }).details.committed).toMatchObject({ entries: 6, bindings: 6, stampsAdded: 0, blobsRepaired: 0 });
    expect(describeError(failure)).toMatch(/this build committed 6 new entries \([\d.]+ KiB\) and 6 new slice bindings, which stay in it$/);
  });
});
