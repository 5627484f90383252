// The decode threads read a blob file into shared memory with readSync. Node refuses a length above
// 2^31 - 1 (ERR_OUT_OF_RANGE), so a payload of 2-4 GiB (a tensor of 1.4-2.1 G values) failed to
// read in one call. readSync is wrapped here to refuse such lengths as Node does, and to pretend it
// read: the 2 GiB target is never touched, so it costs no memory.
import type * as Fs from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { MAX_READ_CHUNK_BYTES } from '../src/create-file-reader.js';
import { readBlobFile } from '../src/decode-thread.js';

const calls = vi.hoisted(() => ({ lengths: [] as number[] }));

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof Fs>();
  return {
    ...actual,
    readSync: (fd: number, target: Uint8Array, offset: number, length: number, position: number) => {
      if (fd !== -7) return actual.readSync(fd, target, offset, length, position);
      if (length > 2 ** 31 - 1) throw Object.assign(new RangeError(`The value of "length" is out of range. Received ${length | 0}`), { code: 'ERR_OUT_OF_RANGE' });
      calls.lengths.push(length);
      return length;
    },
  };
});

describe('readBlobFile', () => {
  it('reads a blob above 2 GiB in pieces of at most MAX_READ_CHUNK_BYTES', () => {
    const target = new Uint8Array(2 ** 31 + 4096);
    readBlobFile(-7, target);
    expect(calls.lengths.every((length) => length <= MAX_READ_CHUNK_BYTES)).toBe(true);
    expect(calls.lengths.reduce((a, b) => a + b, 0)).toBe(target.length);
    expect(calls.lengths).toHaveLength(3);
  });
});
