// A full disk quota (EDQUOT) is NO_SPACE, as a full disk is. Node 20's libuv has no name for
// errno 122: the error's code reads "Unknown system error -122", and the build reported an unknown
// IO_ERROR ("cannot write the blob [Unknown system error -122]").
import { constants } from 'node:os';
import { StoreError } from '@splitzip/store';
import { expect, it } from 'vitest';
import { systemErrorCode } from '../src/describe-error.js';
import { cacheDirError } from '../src/ensure-cache-dir.js';
import { wrapBuildError } from '../src/wrap-build-error.js';

it.runIf(constants.errno.EDQUOT !== undefined)('an EDQUOT that Node cannot name is NO_SPACE, saying the quota is full', () => {
  const system = Object.assign(new Error('Unknown system error -122: Unknown system error -122, write'), {
    errno: -constants.errno.EDQUOT!,
    code: 'Unknown system error -122',
    syscall: 'write',
  });
  const store = new StoreError('IO_ERROR', 'cannot write the blob', { path: '/cache/blobs/x.bin', cause: system });
  expect(systemErrorCode(store)).toBe('EDQUOT');
  const wrapped = wrapBuildError(store, { cacheDir: '/cache', tensor: 'w' });
  expect(wrapped).toMatchObject({ code: 'NO_SPACE', message: expect.stringMatching(/^disk quota exceeded while writing the cache \/cache \(tensor w\)/) });
  // A named ENOSPC still reads as before.
  const full = wrapBuildError(Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' }), { cacheDir: '/cache' });
  expect(full).toMatchObject({ code: 'NO_SPACE', message: expect.stringMatching(/^no space left on device/) });
});

it('a cache directory that cannot be made for a full disk or quota is NO_SPACE, not NOT_WRITABLE', () => {
  // mkdir failing ENOSPC (a full inode table) or EDQUOT: the build said NOT_WRITABLE, a permission problem.
  const enospc = Object.assign(new Error('ENOSPC: no space left on device, mkdir'), { code: 'ENOSPC', errno: -28, syscall: 'mkdir' });
  expect(cacheDirError('/c', enospc)).toMatchObject({ code: 'NO_SPACE', message: 'cannot create the cache directory /c: no space left on device' });
  const eacces = Object.assign(new Error('EACCES: permission denied, mkdir'), { code: 'EACCES', errno: -13, syscall: 'mkdir' });
  expect(cacheDirError('/c', eacces)).toMatchObject({ code: 'NOT_WRITABLE' });
});

it("the store's NO_SPACE is the builder's NO_SPACE, with or without its system error as cause", () => {
  // The store reports a full disk or quota as NO_SPACE (it was IO_ERROR with the errno in the message).
  const quota = new StoreError('NO_SPACE', 'cannot write the blob: the disk quota is full [EDQUOT]', { path: '/cache/blobs/x.bin', details: { errno: 'EDQUOT' } });
  expect(systemErrorCode(quota)).toBe('EDQUOT');
  expect(wrapBuildError(quota, { cacheDir: '/cache', tensor: 'w' })).toMatchObject({
    code: 'NO_SPACE',
    message: expect.stringMatching(/^disk quota exceeded while writing the cache \/cache \(tensor w\); entries committed so far stay valid/),
  });
  const full = new StoreError('NO_SPACE', 'cannot create the cache directories: the disk is full', { path: '/c' });
  expect(cacheDirError('/c', full)).toMatchObject({ code: 'NO_SPACE', message: 'cannot create the cache directory /c: no space left on device' });
  // With the system error as cause (as the store makes it), the same.
  const disk = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
  const withCause = new StoreError('NO_SPACE', 'cannot write the blob: the disk is full [ENOSPC]', { details: { errno: 'ENOSPC' }, cause: disk });
  expect(wrapBuildError(withCause, { cacheDir: '/cache' })).toMatchObject({ code: 'NO_SPACE', message: expect.stringMatching(/^no space left on device while writing the cache/) });
});
