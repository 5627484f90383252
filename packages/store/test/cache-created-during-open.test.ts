// The creator of a directory cache may write manifest.json and let its lock go between an open's
// manifest read (none yet) and its lock read (none now). The open then said plain NOT_A_CACHE,
// "open with create: true", of a cache that exists. With the missing manifest, the open reads it
// again and, if it is there now, opens once more. The interleaving is forced: the lock read is
// stubbed to let the creation finish first.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type * as WriteLock from '../src/write-lock.js';

let beforeLockRead: (() => Promise<void>) | undefined;
vi.mock('../src/write-lock.js', async (importOriginal) => {
  const original = await importOriginal<typeof WriteLock>();
  return {
    ...original,
    readWriteLockHolder: async (...args: Parameters<typeof original.readWriteLockHolder>) => {
      const hook = beforeLockRead;
      beforeLockRead = undefined;
      await hook?.();
      return original.readWriteLockHolder(...args);
    },
  };
});

const { openCacheStore } = await import('../src/index.js');
const { catchError, makeTempDir } = await import('./helpers.js');

describe('a cache whose creation finishes while it is being opened', () => {
  it('opens (its manifest read again) when the creator wrote manifest.json and let the lock go before the lock read', async () => {
    const root = await makeTempDir();
    await mkdir(join(root, 'blobs'));
    let created = false;
    beforeLockRead = async () => {
      // The creator finishes: journal.1 and manifest.json written, the lock let go.
      await (await openCacheStore(root, { create: true })).close();
      created = true;
    };
    const store = await openCacheStore(root);
    try {
      expect(created).toBe(true);
      expect(store.size).toBe(0);
      expect(store.generation).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('with no manifest after the lock read either, NOT_A_CACHE as before (open with create: true)', async () => {
    const root = await makeTempDir();
    await mkdir(join(root, 'blobs'));
    let called = false;
    beforeLockRead = async () => {
      called = true;
    };
    const error = await catchError(() => openCacheStore(root));
    expect(called).toBe(true);
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain('open with create: true');
    expect(error.details).toEqual({});
  });
});
