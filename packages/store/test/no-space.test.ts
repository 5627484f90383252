// A full disk or quota is NO_SPACE (it was IO_ERROR, told from other I/O failure only by the errno
// in the message), and a write that meets it half way leaves nothing half-written: its temp file
// is removed and what was stored before stays readable and valid.
import type * as FsPromises from 'node:fs/promises';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { openCacheStore, StoreError } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

const fault = vi.hoisted(() => ({ match: undefined as RegExp | undefined, errno: '' }));

// Writes to a file whose path matches `fault.match` land half of their first piece, then fail
// with `fault.errno`, as a disk that fills in the middle of a write does.
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof FsPromises>();
  const open = async (...args: Parameters<typeof actual.open>) => {
    const handle = await actual.open(...args);
    if (fault.match === undefined || !fault.match.test(String(args[0]))) return handle;
    let wrote = false;
    return new Proxy(handle, {
      get(target, prop) {
        if (prop === 'write') {
          return async (buffer: Uint8Array, offset: number, length: number, position: number | null) => {
            if (!wrote) {
              wrote = true;
              return target.write(buffer, offset, Math.max(1, length >> 1), position);
            }
            throw Object.assign(new Error(`${fault.errno}: no space, write`), { code: fault.errno, syscall: 'write' });
          };
        }
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  return { ...actual, open, default: { ...actual, open } };
});

afterEach(async () => {
  fault.match = undefined;
  await removeTempDirs();
});

it('a blob write that fills the disk is NO_SPACE, leaves no temp file and loses nothing stored', async () => {
  const root = await makeTempDir();
  const store = await openCacheStore(root, { create: true, compactOnClose: false });
  const a = makeTensor([64, 64], 1);
  const b = makeTensor([64, 64], 2);
  await store.addEntry(toInput(a, 'a'));

  fault.match = /[/\\]blobs[/\\]\.tmp-/;
  fault.errno = 'ENOSPC';
  const error = await catchError(() => store.addEntry(toInput(b, 'b')));
  expect(error).toBeInstanceOf(StoreError);
  expect(error).toMatchObject({ code: 'NO_SPACE', details: { errno: 'ENOSPC' }, path: expect.stringContaining(join(root, 'blobs')) });
  expect((error as Error).message).toMatch(/cannot write the blob: the disk is full \[ENOSPC\]/);
  expect(((error as Error).cause as { code?: string }).code).toBe('ENOSPC');
  expect((await readdir(join(root, 'blobs'))).filter((name) => name.includes('.tmp-'))).toEqual([]);

  // The manifest written by a compaction meets a full quota: the old manifest stays, no temp is left.
  fault.match = /\.manifest$/;
  fault.errno = 'EDQUOT';
  const quota = await catchError(() => store.compact());
  expect(quota).toMatchObject({ code: 'NO_SPACE', details: { errno: 'EDQUOT' } });
  expect((quota as Error).message).toMatch(/the disk quota is full \[EDQUOT\]/);
  expect((await readdir(root)).filter((name) => name.includes('.tmp-'))).toEqual([]);
  fault.match = undefined;
  await store.close();

  const again = await openCacheStore(root);
  expect(again.getEntry(a.key)?.qualname).toBe('a');
  expect(again.getEntry(b.key)).toBeUndefined();
  expect((await again.verify({ decode: true })).ok).toBe(true);
  // Space freed: the same call succeeds.
  await again.addEntry(toInput(b, 'b'));
  expect((await again.verify()).ok).toBe(true);
  await again.close();
});
