// Raw object ranges in a read-through directory, without a server: identity, integrity, unwritable directories.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadThroughCache } from '../src/read-through-cache.js';
import { MAX_READ_THROUGH_RANGE_BYTES, RANGE_FILE_HEADER_BYTES, ReadThroughRanges, type RangeIdentity } from '../src/read-through-ranges.js';
import { makeTempDir, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

const identity = (over: Partial<RangeIdentity> = {}): RangeIdentity => ({
  bucket: 'weights',
  key: 'models/a/model-00001-of-00002.safetensors',
  etag: '"0123456789abcdef0123456789abcdef"',
  sizeBytes: 1 << 20,
  offsetBytes: 4096,
  lengthBytes: 3000,
  ...over,
});

async function rangeFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.startsWith('range.')).sort();
}

async function kept(dir: string, id: RangeIdentity, bytes: Uint8Array): Promise<ReadThroughRanges> {
  const ranges = new ReadThroughRanges(new ReadThroughCache(dir));
  await ranges.keep(id, bytes);
  await ranges.settle();
  return ranges;
}

describe('read-through ranges', () => {
  it('serves a kept range bit-exact, only for exactly its identity (a new ETag, size, offset or length is a miss)', async () => {
    const dir = await makeTempDir();
    const bytes = new Uint8Array(randomBytes(3000));
    const id = identity();
    const writer = await kept(dir, id, bytes);
    expect(writer.stats()).toMatchObject({ written: 1, writeFailures: 0 });
    expect(await rangeFiles(dir)).toHaveLength(1);

    const reader = new ReadThroughRanges(new ReadThroughCache(dir));
    const target = new Uint8Array(3000);
    expect(await reader.readInto(id, target)).toBe(true);
    expect(Buffer.from(target).equals(Buffer.from(bytes))).toBe(true);
    // The same ETag quoted or not is one version (LIST and HEAD may differ in quoting).
    expect(await reader.readInto(identity({ etag: '0123456789abcdef0123456789abcdef' }), target)).toBe(true);
    for (const other of [
      identity({ etag: '"ffffffffffffffffffffffffffffffff"' }),
      identity({ sizeBytes: (1 << 20) + 1 }),
      identity({ offsetBytes: 4097 }),
      identity({ key: 'models/a/model-00002-of-00002.safetensors' }),
      identity({ bucket: 'other' }),
    ]) {
      expect(await reader.readInto(other, target), JSON.stringify(other)).toBe(false);
    }
    const shorter = new Uint8Array(2999);
    expect(await reader.readInto(identity({ lengthBytes: 2999 }), shorter)).toBe(false);
    expect(reader.stats()).toMatchObject({ hits: 2, misses: 6, damaged: 0 });
  });

  it('a damaged body or header is never served: the file is removed and the read is a miss', async () => {
    for (const at of ['body', 'content digest', 'identity digest', 'magic'] as const) {
      const dir = await makeTempDir();
      const bytes = new Uint8Array(randomBytes(3000));
      const id = identity();
      await kept(dir, id, bytes);
      const [name] = await rangeFiles(dir);
      const path = join(dir, name!);
      const file = await readFile(path);
      const offset = { body: RANGE_FILE_HEADER_BYTES + 1234, 'content digest': 8 + 32 + 5, 'identity digest': 8 + 3, magic: 0 }[at];
      file[offset]! ^= 0x01;
      await writeFile(path, file);

      const reader = new ReadThroughRanges(new ReadThroughCache(dir));
      expect(await reader.readInto(id, new Uint8Array(3000)), at).toBe(false);
      expect(reader.stats(), at).toMatchObject({ hits: 0, damaged: 1 });
      expect(await rangeFiles(dir), at).toEqual([]);
    }
  });

  it("another range's file under this range's name (same length) is refused by the identity digest it carries", async () => {
    const dir = await makeTempDir();
    const a = identity({ offsetBytes: 0 });
    const b = identity({ offsetBytes: 3000 });
    await kept(dir, a, new Uint8Array(randomBytes(3000)));
    const [aName] = await rangeFiles(dir);
    await kept(dir, b, new Uint8Array(randomBytes(3000)));
    const bName = (await rangeFiles(dir)).find((name) => name !== aName)!;
    await rename(join(dir, aName!), join(dir, bName));
    const reader = new ReadThroughRanges(new ReadThroughCache(dir));
    expect(await reader.readInto(b, new Uint8Array(3000))).toBe(false);
    expect(reader.stats().damaged).toBe(1);
  });

  it('a truncated file is a miss', async () => {
    const dir = await makeTempDir();
    const id = identity();
    await kept(dir, id, new Uint8Array(randomBytes(3000)));
    const [name] = await rangeFiles(dir);
    const file = await readFile(join(dir, name!));
    await writeFile(join(dir, name!), file.subarray(0, file.length - 1));
    const reader = new ReadThroughRanges(new ReadThroughCache(dir));
    expect(await reader.readInto(id, new Uint8Array(3000))).toBe(false);
    expect(reader.stats()).toMatchObject({ hits: 0, misses: 1 });
  });

  it('an unwritable directory (a path below a regular file) counts write failures and never throws', async () => {
    const dir = await makeTempDir();
    await writeFile(join(dir, 'not-a-dir'), 'x');
    const ranges = new ReadThroughRanges(new ReadThroughCache(join(dir, 'not-a-dir', 'rt')));
    const id = identity();
    await ranges.keep(id, new Uint8Array(3000));
    await ranges.keep(identity({ offsetBytes: 0 }), new Uint8Array(3000));
    await ranges.settle();
    expect(ranges.stats()).toMatchObject({ written: 0, writeFailures: 2 });
    expect(await ranges.readInto(id, new Uint8Array(3000))).toBe(false);
  });

  it('the caller may reuse its buffer as soon as keep() returns: the file holds the bytes it was given', async () => {
    const dir = await makeTempDir();
    const ranges = new ReadThroughRanges(new ReadThroughCache(dir));
    const bytes = new Uint8Array(randomBytes(3000));
    const original = bytes.slice();
    const id = identity();
    await ranges.keep(id, bytes);
    bytes.fill(0);
    await ranges.settle();
    const target = new Uint8Array(3000);
    expect(await ranges.readInto(id, target)).toBe(true);
    expect(Buffer.from(target).equals(Buffer.from(original))).toBe(true);
  });

  it('admits ranges of 1..MAX_READ_THROUGH_RANGE_BYTES; larger ones are counted bypassed', () => {
    const ranges = new ReadThroughRanges(new ReadThroughCache('/nonexistent'));
    expect(ranges.accepts(1)).toBe(true);
    expect(ranges.accepts(MAX_READ_THROUGH_RANGE_BYTES)).toBe(true);
    expect(ranges.accepts(MAX_READ_THROUGH_RANGE_BYTES + 1)).toBe(false);
    expect(ranges.accepts(0)).toBe(false);
    expect(ranges.stats().bypassed).toBe(1);
  });
});

describe('read-through files', () => {
  it('a FIFO planted in the directory is a miss at once, small file or large (it never blocks a thread)', async () => {
    const dir = await makeTempDir();
    const cache = new ReadThroughCache(dir);
    execFileSync('mkfifo', [join(dir, 'planted')]);
    // Under READ_THROUGH_SYNC_MAX_BYTES the open is synchronous (it would block the event loop for good), above it a pool thread.
    for (const bytes of [16, 4 << 20]) expect(await cache.readFileInto('planted', [new Uint8Array(bytes)])).toBe(false);
  }, 10_000);
});
