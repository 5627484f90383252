// gc and dropUnboundEntries on a cache this process cannot write: the store said IO_ERROR ("cannot
// create the lock file [EROFS]"), where the CLI says NOT_WRITABLE; now the store's code is
// NOT_WRITABLE too, with the errno, the system call and the path in `details`. A refused read
// stays IO_ERROR, and a dry run (which writes nothing) still answers.
//
// Read-only is made as it happens: a read-only bind mount as root (who writes through any mode
// bits), mode 0555 otherwise; skipped only as root where mount is not allowed (no CAP_SYS_ADMIN).
import { spawnSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCacheStore, StoreError } from '../src/index.js';
import { toWriteError } from '../src/errors.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { isRoot, makeReadOnly } from './make-read-only.js';
import { catchError, makeCache, makeTensor, toInput } from './helpers.js';


function deadPid(): number {
  return spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
}

function expectNotWritable(error: Error & { code?: string; path?: string; details?: Record<string, unknown> }, path: string): void {
  expect(error, error.message).toBeInstanceOf(StoreError);
  expect(error.code, error.message).toBe('NOT_WRITABLE');
  expect(error.path).toBe(path);
  expect(error.details).toMatchObject({ errno: isRoot ? 'EROFS' : 'EACCES', path });
  expect(typeof error.details!.syscall).toBe('string');
  expect(error.message).toContain(`: ${isRoot ? 'the file system is read-only [EROFS]' : 'permission denied [EACCES]'}`);
  expect((error.cause as { code?: string }).code).toBe(isRoot ? 'EROFS' : 'EACCES');
}

describe('a cache this process cannot write', () => {
  it('gc: NOT_WRITABLE naming the lock file (was IO_ERROR); its dry run still reports', async (context) => {
    const { root } = await makeCache(2);
    const undo = await makeReadOnly(root);
    if (undo === undefined) return context.skip('root without mount: no way to make a directory read-only here');
    try {
      const store = await openCacheStore(root);
      try {
        expect((await store.gc({ dryRun: true })).orphanBlobs).toEqual([]);
        expectNotWritable(await catchError(() => store.gc()), join(root, 'lock'));
        expect((await catchError(() => store.gc())).message).toMatch(/^NOT_WRITABLE: cannot create the lock file: /);
      } finally {
        await store.close();
      }
    } finally {
      await undo();
    }
  });

  it('dropUnboundEntries: NOT_WRITABLE, nothing removed; its dry run lists the unbound entry', async (context) => {
    const { root } = await makeCache(1);
    const unbound = makeTensor([24, 5], 4711);
    const writer = await openCacheStore(root);
    await writer.addEntry(toInput(unbound, 'unbound.weight'));
    await writer.close();
    const manifest = await readFile(join(root, 'manifest.json'));
    const undo = await makeReadOnly(root);
    if (undo === undefined) return context.skip('root without mount: no way to make a directory read-only here');
    try {
      const store = await openCacheStore(root);
      try {
        expect((await store.dropUnboundEntries({ dryRun: true })).entries.map((entry) => entry.key)).toEqual([unbound.key]);
        expectNotWritable(await catchError(() => store.dropUnboundEntries()), join(root, 'lock'));
        expect(store.getEntry(unbound.key)).toBeDefined();
      } finally {
        await store.close();
      }
    } finally {
      await undo();
    }
    expect(await readFile(join(root, 'manifest.json'))).toEqual(manifest);
  });

  it("gc whose lock is taken but whose orphan blob cannot be removed (blobs/ read-only): NOT_WRITABLE naming the blob", async (context) => {
    const { root } = await makeCache(1);
    const orphan = join(root, 'blobs', `${'ab'.repeat(20)}.bin`);
    await writeFile(orphan, 'not referenced by any entry');
    const undo = await makeReadOnly(join(root, 'blobs'));
    if (undo === undefined) return context.skip('root without mount: no way to make a directory read-only here');
    try {
      const store = await openCacheStore(root);
      try {
        expectNotWritable(await catchError(() => store.gc()), orphan);
      } finally {
        await store.close();
      }
    } finally {
      await undo();
    }
    // The lock was released; with blobs/ writable again gc removes the orphan.
    const store = await openCacheStore(root);
    expect((await store.gc()).orphanBlobs).toEqual([`blobs/${'ab'.repeat(20)}.bin`]);
    await store.close();
  });
  it("removeAbandonedTempFiles whose dead writer's staged blob cannot be removed (blobs/ read-only): NOT_WRITABLE naming it", async (context) => {
    const { root } = await makeCache(1);
    const staged = join(root, 'blobs', `.tmp-${deadPid()}-${'cd'.repeat(8)}.${pidSpaceTag()}.bin`);
    await writeFile(staged, 'a dead writer\'s staged blob');
    const undo = await makeReadOnly(join(root, 'blobs'));
    if (undo === undefined) return context.skip('root without mount: no way to make a directory read-only here');
    try {
      const store = await openCacheStore(root);
      try {
        expectNotWritable(await catchError(() => store.removeAbandonedTempFiles!()), staged);
      } finally {
        await store.close();
      }
    } finally {
      await undo();
    }
  });
});

describe('toWriteError', () => {
  const systemError = (code: string, syscall: string) => Object.assign(new Error(`${code}: x, ${syscall} '/c/f'`), { code, syscall, path: '/c/f' });

  it('a refused write is NOT_WRITABLE; EPERM of link (no hard links there), ENOSPC and other errnos are not', () => {
    for (const code of ['EROFS', 'EACCES', 'EPERM']) {
      expect(toWriteError(systemError(code, 'unlink'), 'cannot remove', { path: '/c/f' })).toMatchObject({ code: 'NOT_WRITABLE', path: '/c/f', details: { errno: code, syscall: 'unlink', path: '/c/f' } });
    }
    expect(toWriteError(systemError('EPERM', 'link'), 'cannot create the lock file')).toMatchObject({ code: 'IO_ERROR', details: { errno: 'EPERM' } });
    expect(toWriteError(systemError('ENOSPC', 'write'), 'cannot create the lock file')).toMatchObject({ code: 'NO_SPACE' });
    expect(toWriteError(systemError('EIO', 'unlink'), 'cannot remove')).toMatchObject({ code: 'IO_ERROR', details: { errno: 'EIO' } });
    // A StoreError (a refused read of the lock, say) passes through as it is.
    const read = new StoreError('IO_ERROR', 'cannot read the lock file [EACCES]', { cause: systemError('EACCES', 'open') });
    expect(toWriteError(read, 'cannot release the lock')).toBe(read);
  });
});
