// Where a file system gives no file types in its listings (ext4 made with -O ^filetype, XFS with
// ftype=0, many FUSE and NFS mounts), Node's readdir({ withFileTypes: true }) lstats every name
// itself and rejects the whole listing with ENOENT when one name is gone by then. The cache's
// listing must not read that as "no such directory". Node's steps are simulated here.
import type * as FsPromises from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';

const churn = { dirs: new Set<string>() };

vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  const readdir = async (path: string, options?: { withFileTypes?: boolean }) => {
    // A file another process creates and removes (a lock file, a staged temp blob renamed into place):
    // there at getdents, gone right after (the old code's own lstat of it then gets ENOENT, as here Node's does).
    const vanishing = churn.dirs.has(String(path)) ? join(String(path), 'x.tmp-1-0123456789abcdef') : undefined;
    if (vanishing) await actual.writeFile(vanishing, 'x');
    const names = await actual.readdir(path); // getdents: types DT_UNKNOWN
    if (vanishing) await actual.rm(vanishing, { force: true });
    if (!options?.withFileTypes) return names;
    // getDirents: an lstat per UNKNOWN name, the first error rejects the readdir.
    const stats = await Promise.all(names.map((name) => actual.lstat(join(String(path), name))));
    return names.map((name, i) => ({ name, isFile: () => stats[i]!.isFile(), isDirectory: () => stats[i]!.isDirectory(), isSymbolicLink: () => stats[i]!.isSymbolicLink() }));
  };
  return { ...actual, readdir, default: { ...actual, readdir } };
});

const { readdir, writeFile } = await import('node:fs/promises');
const { openCacheStore } = await import('../src/index.js');
const { makeCache, makeRestoredOlderCopy, removeTempDirs } = await import('./helpers.js');

afterEach(async () => {
  churn.dirs.clear();
  await removeTempDirs();
});

it('gc reports an orphan blob while a staged temp blob in blobs/ is renamed away during the listing', async () => {
  const { root } = await makeCache(2);
  const orphan = `${'ab'.repeat(20)}.bin`;
  await writeFile(join(root, 'blobs', orphan), new Uint8Array(300));
  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    churn.dirs.add(join(root, 'blobs'));
    const report = await store.gc({ dryRun: true });
    expect(report.orphanBlobs).toEqual([`blobs/${orphan}`]);
  } finally {
    await store.close();
  }
});

it('gc beside an older manifest copy still refuses when a root file comes and goes during its journal listing (else it deletes the newer commits\' blobs)', async () => {
  const { root, late } = await makeRestoredOlderCopy();
  const store = await openCacheStore(root, { compactOnClose: false });
  try {
    churn.dirs.add(root);
    let code: string | undefined;
    await store.gc({ minAgeMs: 0 }).catch((error: { code?: string }) => (code = error.code));
    churn.dirs.clear();
    expect(await readdir(join(root, 'blobs'))).toContain(`${late.key}.bin`);
    expect(code).toBe('MANIFEST_INVALID');
  } finally {
    await store.close().catch(() => undefined);
  }
});
