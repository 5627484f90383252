// A reader that finds a kept range wrong by a check of its own (a content key, a parse) drops it:
// the file's digest only proves the bytes are what a GET returned, damaged in transit or not.
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadThroughCache } from '../src/read-through-cache.js';
import { ReadThroughRanges, type RangeIdentity } from '../src/read-through-ranges.js';
import { makeTempDir, removeTempDirs } from './helpers.js';

afterEach(removeTempDirs);

const identity: RangeIdentity = {
  bucket: 'weights',
  key: 'models/a/model-00001-of-00002.safetensors',
  etag: '"0123456789abcdef0123456789abcdef"',
  sizeBytes: 1 << 20,
  offsetBytes: 4096,
  lengthBytes: 3000,
};

const rangeFiles = async (dir: string) => (await readdir(dir)).filter((name) => name.startsWith('range.'));

describe('read-through ranges: drop', () => {
  it('removes a kept range, also one whose background write is still running, so the next read is a miss', async () => {
    const dir = await makeTempDir();
    const ranges = new ReadThroughRanges(new ReadThroughCache(dir));
    const bytes = new Uint8Array(randomBytes(identity.lengthBytes));
    await ranges.keep(identity, bytes); // written in the background
    await ranges.drop(identity); // waits for that write, then removes it
    await ranges.settle();
    expect(await rangeFiles(dir)).toEqual([]);
    expect(await ranges.readInto(identity, new Uint8Array(identity.lengthBytes))).toBe(false);
    expect(ranges.stats()).toMatchObject({ written: 1, dropped: 1, hits: 0, misses: 1 });

    // Kept again (the range fetched anew), it is served again; dropping an absent range is harmless.
    await ranges.keep(identity, bytes);
    await ranges.settle();
    const target = new Uint8Array(identity.lengthBytes);
    expect(await ranges.readInto(identity, target)).toBe(true);
    expect(Buffer.from(target).equals(Buffer.from(bytes))).toBe(true);
    await ranges.drop(identity);
    await ranges.drop(identity);
    expect(await rangeFiles(dir)).toEqual([]);
  });
});

describe('read-through ranges: distrust', () => {
  it('drops every range this instance kept (a write still running too), keeps no more, and leaves other instances’ files', async () => {
    const dir = await makeTempDir();
    const earlier = new ReadThroughRanges(new ReadThroughCache(dir));
    const old = { ...identity, offsetBytes: 0, lengthBytes: 100 };
    await earlier.keep(old, new Uint8Array(randomBytes(100)));
    await earlier.settle();

    const ranges = new ReadThroughRanges(new ReadThroughCache(dir));
    await ranges.keep(identity, new Uint8Array(randomBytes(identity.lengthBytes)));
    await ranges.settle();
    const second = { ...identity, offsetBytes: 10_000 };
    await ranges.keep(second, new Uint8Array(randomBytes(second.lengthBytes))); // still being written
    expect(ranges.distrusted).toBe(false);
    await ranges.distrust();
    await ranges.settle();
    expect(ranges.distrusted).toBe(true);
    expect(await rangeFiles(dir)).toHaveLength(1); // the earlier instance's
    expect(await ranges.readInto(old, new Uint8Array(100))).toBe(true);

    await ranges.keep(identity, new Uint8Array(randomBytes(identity.lengthBytes)));
    await ranges.settle();
    expect(await rangeFiles(dir)).toHaveLength(1);
    expect(ranges.stats()).toMatchObject({ written: 2, dropped: 2, distrusted: 1 });
    await ranges.distrust(); // idempotent
    expect(ranges.stats()).toMatchObject({ dropped: 2 });
  });
});
