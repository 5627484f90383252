// Host file stamps (HostFileStamps) without a gateway: memory and the read-through directory's
// stamps.<sha256>.bin files, their cap, their validation (damaged files read as absent, never
// thrown) and writes that fail.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, readdir, rm, stat, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_HOST_STAMP_FILE_BYTES, MAX_SLICE_STAMPS, MAX_SLICE_STAMP_CHARS } from '../src/index.js';
import { HOST_STAMP_FILE_HEADER_BYTES, HostFileStamps, hostStampFileName, parseHostStampFile, serializeHostStampFile } from '../src/host-file-stamps.js';
import { ReadThroughCache } from '../src/read-through-cache.js';
import { makeTempDir, removeTempDirs } from './helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const KEY_A = 'a'.repeat(40);
const KEY_B = 'b'.repeat(40);
const fileStamp = (n: number): string => `80:${1733400000000000000n + BigInt(n)}`;
const slice = (offset = 0, size = 80) => [SHARD, offset, size] as const;

afterAll(removeTempDirs);

/** A host-stamp file with this body text, its digest right (or as given). */
function stampFile(body: string | Buffer, digest?: Buffer): Buffer {
  const bytes = Buffer.from(body);
  return Buffer.concat([Buffer.from('SZHSTMP1'), digest ?? createHash('sha256').update(bytes).digest(), bytes]);
}
const goodBody = (records: unknown[], shard: string = SHARD) => JSON.stringify({ version: 1, shard, records });

describe('host file stamps', () => {
  it('are kept in memory without a directory, per (slice, key), and only file stamps', async () => {
    const stamps = new HostFileStamps(undefined);
    await stamps.record([
      { slice: slice(), key: KEY_A, stamp: fileStamp(1) },
      { slice: slice(), key: KEY_A, stamp: 'etag:"0123"' }, // an object stamp: the bucket's, not a host stamp
    ]);
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_B)).toEqual([]); // another key's binding
    expect(stamps.stampsOf(SHARD, 80, 80, KEY_A)).toEqual([]);
    expect(stamps.counts).toEqual({ written: 0, writeFailures: 0 });
  });

  it('are written to the directory, seen by another instance, and read again after forgetLoaded', async () => {
    const dir = await makeTempDir();
    const first = new HostFileStamps(new ReadThroughCache(dir));
    const second = new HostFileStamps(new ReadThroughCache(dir));
    expect(second.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]); // read (absent) and kept until forgetLoaded
    await first.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(1) }]);
    expect(await readdir(dir)).toEqual([hostStampFileName(SHARD)]);
    expect(hostStampFileName(SHARD)).toBe(`stamps.${createHash('sha256').update(SHARD).digest('hex')}.bin`);
    expect(second.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]);
    second.forgetLoaded();
    expect(second.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
    // A write merges into the file as it is: second's record keeps first's.
    await second.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(2) }, { slice: slice(160), key: KEY_B, stamp: fileStamp(3) }]);
    const third = new HostFileStamps(new ReadThroughCache(dir));
    expect(third.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1), fileStamp(2)]);
    expect(third.stampsOf(SHARD, 160, 80, KEY_B)).toEqual([fileStamp(3)]);
    const bytes = await readFile(join(dir, hostStampFileName(SHARD)));
    expect(bytes.subarray(0, 8).toString()).toBe('SZHSTMP1');
    expect(JSON.parse(bytes.subarray(HOST_STAMP_FILE_HEADER_BYTES).toString())).toEqual({
      version: 1,
      shard: SHARD,
      records: [
        [0, 80, KEY_A, [fileStamp(1), fileStamp(2)]],
        [160, 80, KEY_B, [fileStamp(3)]],
      ],
    });
    // Recording a stamp the file has already writes nothing.
    const written = (await stat(join(dir, hostStampFileName(SHARD)))).mtimeMs;
    await third.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(2) }]);
    expect(third.counts.written).toBe(0);
    expect((await stat(join(dir, hostStampFileName(SHARD)))).mtimeMs).toBe(written);
  });

  it('keep the newest MAX_SLICE_STAMPS file stamps of a (slice, key), in memory and in the file', async () => {
    const dir = await makeTempDir();
    const stamps = new HostFileStamps(new ReadThroughCache(dir));
    const count = MAX_SLICE_STAMPS + 5;
    for (let n = 0; n < count; n++) await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(n) }]);
    const newest = Array.from({ length: MAX_SLICE_STAMPS }, (_, i) => fileStamp(count - MAX_SLICE_STAMPS + i));
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual(newest);
    expect(new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)).toEqual(newest);
    // In one call too.
    const batch = new HostFileStamps(undefined);
    await batch.record(Array.from({ length: count }, (_, n) => ({ slice: slice(), key: KEY_A, stamp: fileStamp(n) })));
    expect(batch.stampsOf(SHARD, 0, 80, KEY_A)).toEqual(newest);
  });

  it('a damaged or foreign file reads as absent, never throws, and the next record rewrites it', async () => {
    const record = [0, 80, KEY_A, [fileStamp(1)]];
    const good = stampFile(goodBody([record]));
    expect(parseHostStampFile(good, SHARD)?.get(`0:80:${KEY_A}`)).toEqual([fileStamp(1)]);
    const cases: [string, Buffer][] = [
      ['empty', Buffer.alloc(0)],
      ['truncated', good.subarray(0, good.length - 3)],
      ['header only', good.subarray(0, HOST_STAMP_FILE_HEADER_BYTES)],
      ['bad magic', Buffer.concat([Buffer.from('SZHSTMP2'), good.subarray(8)])],
      ['bad checksum', stampFile(goodBody([record]), Buffer.alloc(32))],
      ['bad JSON', stampFile('{"version":1,"shard":')],
      ['not UTF-8', stampFile(Buffer.from(goodBody([record]).replace('model', 'mod\u00ffl'), 'latin1'))],
      ['repeated key', stampFile(`{"version":1,"shard":${JSON.stringify(SHARD)},"records":[],"records":[${JSON.stringify(record)}]}`)],
      ['an array', stampFile(JSON.stringify([1, SHARD, [record]]))],
      ['another version', stampFile(JSON.stringify({ version: 2, shard: SHARD, records: [record] }))],
      ['an extra field', stampFile(JSON.stringify({ version: 1, shard: SHARD, records: [record], extra: 1 }))],
      ['wrong shard name', stampFile(goodBody([record], 'model-00002-of-00002.safetensors'))],
      ['records not an array', stampFile(JSON.stringify({ version: 1, shard: SHARD, records: {} }))],
      ['a bad key', stampFile(goodBody([[0, 80, 'A'.repeat(40), [fileStamp(1)]]]))],
      ['a short key', stampFile(goodBody([[0, 80, KEY_A.slice(1), [fileStamp(1)]]]))],
      ['a negative offset', stampFile(goodBody([[-80, 80, KEY_A, [fileStamp(1)]]]))],
      ['a fractional size', stampFile(goodBody([[0, 80.5, KEY_A, [fileStamp(1)]]]))],
      ['an unsafe offset', stampFile(goodBody([[2 ** 53, 80, KEY_A, [fileStamp(1)]]]))],
      ['a string offset', stampFile(goodBody([['0', 80, KEY_A, [fileStamp(1)]]]))],
      ['a record of 3', stampFile(goodBody([[0, 80, KEY_A]]))],
      ['no stamps', stampFile(goodBody([[0, 80, KEY_A, []]]))],
      ['too many stamps', stampFile(goodBody([[0, 80, KEY_A, Array.from({ length: MAX_SLICE_STAMPS + 1 }, (_, n) => fileStamp(n))]]))],
      ['a repeated stamp', stampFile(goodBody([[0, 80, KEY_A, [fileStamp(1), fileStamp(1)]]]))],
      ['a long stamp', stampFile(goodBody([[0, 80, KEY_A, ['1'.repeat(MAX_SLICE_STAMP_CHARS + 1)]]]))],
      ['a NUL stamp', stampFile(goodBody([[0, 80, KEY_A, ['80:1\0']]]))],
      ['an object stamp', stampFile(goodBody([[0, 80, KEY_A, ['etag:"0123"']]]))],
      ['a record twice', stampFile(goodBody([record, record]))],
    ];
    for (const [why, bytes] of cases) expect([why, parseHostStampFile(bytes, SHARD)]).toEqual([why, undefined]);

    const dir = await makeTempDir();
    const path = join(dir, hostStampFileName(SHARD));
    for (const [why, bytes] of cases) {
      await writeFile(path, bytes);
      const stamps = new HostFileStamps(new ReadThroughCache(dir));
      expect([why, stamps.stampsOf(SHARD, 0, 80, KEY_A)]).toEqual([why, []]);
      await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(2) }]);
      expect([why, new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)]).toEqual([why, [fileStamp(2)]]);
    }
  });

  it('a file above MAX_HOST_STAMP_FILE_BYTES is refused before it is read, and rewritten by the next record', async () => {
    const dir = await makeTempDir();
    const path = join(dir, hostStampFileName(SHARD));
    // Valid in every other way: only its size refuses it.
    const filler = 'x'.repeat(MAX_HOST_STAMP_FILE_BYTES);
    const big = stampFile(JSON.stringify({ version: 1, shard: SHARD, records: [[0, 80, KEY_A, [fileStamp(1)]]] }).replace('{', `{"pad":${JSON.stringify(filler)},`));
    expect(big.length).toBeGreaterThan(MAX_HOST_STAMP_FILE_BYTES);
    await writeFile(path, big);
    const stamps = new HostFileStamps(new ReadThroughCache(dir));
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]);
    await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(2) }]);
    expect((await stat(path)).size).toBeLessThan(1024);
    expect(new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(2)]);
  });

  it('a writer leaves out the least recently recorded records to stay within MAX_HOST_STAMP_FILE_BYTES', () => {
    const stamps = Array.from({ length: MAX_SLICE_STAMPS }, (_, n) => `${n}:${'9'.repeat(MAX_SLICE_STAMP_CHARS - 4)}`);
    const count = Math.ceil(MAX_HOST_STAMP_FILE_BYTES / (MAX_SLICE_STAMPS * MAX_SLICE_STAMP_CHARS)) + 10;
    const records = new Map(Array.from({ length: count }, (_, n) => [`${n * 80}:80:${KEY_A}`, stamps] as const));
    const { bytes, kept } = serializeHostStampFile(SHARD, records);
    expect(bytes.length).toBeLessThanOrEqual(MAX_HOST_STAMP_FILE_BYTES);
    expect(kept.size).toBeLessThan(count);
    expect(kept.has(`${(count - 1) * 80}:80:${KEY_A}`)).toBe(true);
    expect(kept.has(`0:80:${KEY_A}`)).toBe(false);
    expect([...(parseHostStampFile(bytes, SHARD)?.keys() ?? [])]).toEqual([...kept.keys()]);
  });

  it('a directory, a link or a FIFO in the file\'s place reads as absent; a directory is moved aside by the next record', async () => {
    const dir = await makeTempDir();
    const path = join(dir, hostStampFileName(SHARD));
    await mkdir(path);
    const stamps = new HostFileStamps(new ReadThroughCache(dir));
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]);
    await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(1) }]);
    expect((await stat(path)).isFile()).toBe(true);
    expect(new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
    expect((await readdir(dir)).some((name) => name.startsWith(`${hostStampFileName(SHARD)}.displaced-`))).toBe(true);
    // A link to a valid file is not followed; a FIFO does not block the lookup.
    const target = join(dir, 'elsewhere');
    await writeFile(target, await readFile(path));
    await unlink(path);
    await symlink(target, path);
    expect(new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]);
    await unlink(path);
    execFileSync('mkfifo', [path]);
    expect(new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, 80, KEY_A)).toEqual([]);
  });

  it('a write that fails (a file where the directory should be) keeps the record in memory and does not reject', async () => {
    const parent = await makeTempDir();
    const dir = join(parent, 'rt');
    await writeFile(dir, 'not a directory');
    const stamps = new HostFileStamps(new ReadThroughCache(dir));
    await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(1) }]);
    expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
    expect(stamps.counts).toEqual({ written: 0, writeFailures: 1 });
    // Once the directory can be made, the next record writes this instance's earlier ones too.
    await rm(dir);
    await stamps.record([{ slice: slice(160), key: KEY_A, stamp: fileStamp(2) }]);
    const other = new HostFileStamps(new ReadThroughCache(dir));
    expect(other.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
    expect(other.stampsOf(SHARD, 160, 80, KEY_A)).toEqual([fileStamp(2)]);
  });

  // Root writes into a read-only directory: only a non-root user sees the failure.
  it.skipIf(process.getuid?.() === 0)('a read-only directory: the record stays in memory, nothing rejects', async () => {
    const dir = await makeTempDir();
    await chmod(dir, 0o555);
    try {
      const stamps = new HostFileStamps(new ReadThroughCache(dir));
      await stamps.record([{ slice: slice(), key: KEY_A, stamp: fileStamp(1) }]);
      expect(stamps.stampsOf(SHARD, 0, 80, KEY_A)).toEqual([fileStamp(1)]);
      expect(stamps.counts.writeFailures).toBe(1);
    } finally {
      await chmod(dir, 0o755);
    }
  });
});
