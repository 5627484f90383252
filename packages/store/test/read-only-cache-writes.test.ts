// A build's writes into a local cache the file system refuses: a blob into a read-only blobs/, a
// commit into a journal this process may not open for writing, a new manifest into a root made
// read-only after the lock was taken. The store said IO_ERROR ("cannot write the blob [EROFS]")
// where the lock's creation says NOT_WRITABLE; now each says NOT_WRITABLE with the errno, the
// system call and the path in `details`, and nothing stored is lost or half-written: no temp file
// is left, the manifest and journal are the bytes they were, and the handle writes again once the
// cache is writable (a refused journal open left it unable to write until reopened).
//
// Read-only is made as read-only-cache.test.ts makes it: a read-only bind mount as root (a file or
// a directory), mode 0444/0555 otherwise; skipped only as root where mount is not allowed.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsCacheStore } from '../src/cache-store.js';
import { FsBackend } from '../src/fs-backend.js';
import { openCacheStore, StoreError } from '../src/index.js';
import { isRoot, makeReadOnly } from './make-read-only.js';
import { catchError, makeCache, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const SKIP_REASON = 'root without mount: no way to make a path read-only here';

function expectNotWritable(error: Error & { code?: string; path?: string; details?: Record<string, unknown> }, path: string | RegExp, syscall: string): void {
  expect(error, error.message).toBeInstanceOf(StoreError);
  expect(error.code, error.message).toBe('NOT_WRITABLE');
  if (typeof path === 'string') expect(error.path).toBe(path);
  else expect(error.path).toMatch(path);
  expect(error.details).toMatchObject({ errno: isRoot ? 'EROFS' : 'EACCES', syscall, path: error.path });
  expect(error.message).toContain(`: ${isRoot ? 'the file system is read-only [EROFS]' : 'permission denied [EACCES]'}`);
}

/** The cache's files by name with their bytes (blobs/ included), to show nothing changed. */
async function snapshotFiles(root: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  for (const dir of ['', 'blobs']) {
    for (const entry of await readdir(join(root, dir), { withFileTypes: true })) {
      if (entry.isFile() && entry.name !== 'lock') files.set(join(dir, entry.name), await readFile(join(root, dir, entry.name)));
    }
  }
  return files;
}

async function journalName(root: string): Promise<string> {
  const journals = (await readdir(root)).filter((name) => /^journal\.\d+$/.test(name));
  expect(journals).toHaveLength(1);
  return journals[0]!;
}

describe('a write the directory cache refuses is NOT_WRITABLE, and nothing stored changes', () => {
  it('addEntry into a read-only blobs/: NOT_WRITABLE naming the staged blob (was IO_ERROR); no temp file; the same handle adds it once blobs/ is writable', async (context) => {
    const { root, tensors } = await makeCache(1);
    const added = makeTensor([20, 6], 4242);
    const before = await snapshotFiles(root);
    const store = await openCacheStore(root, { compactOnClose: false });
    try {
      const undo = await makeReadOnly(join(root, 'blobs'));
      if (undo === undefined) return context.skip(SKIP_REASON);
      try {
        const error = await catchError(() => store.addEntry(toInput(added, 'added.weight')));
        expectNotWritable(error, new RegExp(`^${join(root, 'blobs')}/\\.tmp-[^/]+\\.bin$`), 'open');
        expect(error.entry).toBe(added.key);
        expect(store.getEntry(added.key)).toBeUndefined();
      } finally {
        await undo();
      }
      expect(await snapshotFiles(root)).toEqual(before);
      await store.addEntry(toInput(added, 'added.weight'));
      expect(store.getEntry(added.key)).toBeDefined();
    } finally {
      await store.close();
    }
    const reopened = await openCacheStore(root);
    expect(reopened.getEntry(tensors[0]!.key)).toBeDefined();
    expect(reopened.getEntry(added.key)).toBeDefined();
    expect((await reopened.verify()).ok).toBe(true);
    await reopened.close();
  });

  it('aliasSlices with the lock taken but a journal this process may not open for writing: NOT_WRITABLE naming the journal; the handle is not left unable to write', async (context) => {
    const { root, tensors } = await makeCache(1);
    const journal = join(root, await journalName(root));
    const before = await snapshotFiles(root);
    const store = await openCacheStore(root, { compactOnClose: false });
    const alias = { key: tensors[0]!.key, shardName: 'other-shard', offsetBytes: 0, sizeBytes: 240 };
    try {
      const undo = await makeReadOnly(journal);
      if (undo === undefined) return context.skip(SKIP_REASON);
      try {
        expectNotWritable(await catchError(() => store.aliasSlices([alias])), journal, 'open');
      } finally {
        await undo();
      }
      // Was: the failed append fenced (a new journal made, its seal refused too), and the handle
      // said IO_ERROR "writes nothing more" to every later write.
      expect(await snapshotFiles(root)).toEqual(before);
      expect(await store.aliasSlices([alias])).toEqual([true]);
    } finally {
      await store.close();
    }
    const reopened = await openCacheStore(root);
    expect(reopened.getEntry(tensors[0]!.key)?.sliceKeys.length).toBe(2);
    await reopened.close();
  });

  it('a compaction whose new manifest the root refuses (read-only once the lock is taken): NOT_WRITABLE naming the manifest; it stays the last complete generation, no temp file', async (context) => {
    const { root, tensors } = await makeCache(1);
    const added = makeTensor([20, 6], 4243);
    const writer = await openCacheStore(root, { compactOnClose: false });
    await writer.addEntry(toInput(added, 'added.weight'));
    await writer.close();
    const manifest = await readFile(join(root, 'manifest.json'));
    let undo: (() => Promise<void>) | undefined;
    let mountFailed = false;
    class RootMadeReadOnly extends FsBackend {
      override async writeManifest(bytes: Uint8Array): Promise<void> {
        undo ??= await makeReadOnly(root);
        if (undo === undefined) mountFailed = true;
        return super.writeManifest(bytes);
      }
    }
    const store = await FsCacheStore.load(new RootMadeReadOnly(root), { lockTimeoutMs: 2000, refreshIntervalMs: undefined, compactOnClose: false });
    try {
      const error = await catchError(() => store.compact());
      if (mountFailed) return context.skip(SKIP_REASON);
      expectNotWritable(error, join(root, 'manifest.json'), 'open');
    } finally {
      await undo?.();
      await store.close();
    }
    expect(await readFile(join(root, 'manifest.json'))).toEqual(manifest);
    expect((await readdir(root)).filter((name) => name.startsWith('.tmp-'))).toEqual([]);
    const reopened = await openCacheStore(root, { compactOnClose: false });
    expect(reopened.getEntry(tensors[0]!.key)).toBeDefined();
    expect(reopened.getEntry(added.key)).toBeDefined();
    expect((await reopened.verify()).ok).toBe(true);
    await reopened.close();
  });
});
