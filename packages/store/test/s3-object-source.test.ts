// openS3ObjectSource against the gateway: ETags, If-Match, and raw ranges through a read-through directory.
import { randomBytes } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterEach, expect, it } from 'vitest';
import { openS3Object, openS3ObjectSource, type S3ObjectSource } from '../src/index.js';
import { catchError, makeTempDir, removeTempDirs } from './helpers.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

/** A client that counts the commands it sends (by name); the source destroys it on close. */
function countingClient(): { client: S3Client; counts: Map<string, number> } {
  const client = rawClient();
  const counts = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => (args) => {
      counts.set(context.commandName ?? '?', (counts.get(context.commandName ?? '?') ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'countCommands' },
  );
  return { client, counts };
}

/** Reads every [offset, length) of `ranges` from `name` through a fresh listed source. */
async function readRanges(source: S3ObjectSource, name: string, ranges: readonly [number, number][]): Promise<Uint8Array[]> {
  await source.list();
  const object = (await source.open(name))!;
  return Promise.all(
    ranges.map(async ([offset, length]) => {
      const target = new Uint8Array(length);
      await object.readInto(offset, target);
      return target;
    }),
  );
}

describeS3('S3 object source against the gateway', () => {
  const bucket = uniqueBucket('objsrc');
  const client = rawClient();
  let run = 0;
  const nextPrefix = () => `t${run++}/`;
  const put = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  const RANGES: [number, number][] = [
    [0, 4096],
    [4096, 100_000],
    [200_000, 300_000],
  ];
  const expected = (bytes: Uint8Array) => RANGES.map(([offset, length]) => bytes.subarray(offset, offset + length));
  const expectSame = (got: Uint8Array[], want: Uint8Array[]) => {
    expect(got.length).toBe(want.length);
    for (let i = 0; i < got.length; i++) expect(Buffer.from(got[i]!).equals(Buffer.from(want[i]!)), `range ${i}`).toBe(true);
  };

  useTestBucket(client, bucket);

  it('open() gives the ETag the server has (from the LIST, or HeadObject), the same either way', async () => {
    const prefix = nextPrefix();
    await put(`${prefix}a.bin`, new Uint8Array(randomBytes(1000)));
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}a.bin` }));
    const source = openS3ObjectSource(`s3://${bucket}/${prefix}`);
    try {
      expect(await source.list()).toEqual(['a.bin']);
      expect((await source.open('a.bin'))!.etag).toBe(head.ETag);
    } finally {
      await source.close();
    }
    const alone = await openS3Object(`s3://${bucket}/${prefix}a.bin`);
    try {
      expect(alone.etag).toBe(head.ETag);
    } finally {
      await alone.close();
    }
  });

  it('an object replaced by one of the same size after open() fails with OBJECT_CHANGED (If-Match), never with the new bytes', async () => {
    const prefix = nextPrefix();
    await put(`${prefix}a.bin`, new Uint8Array(randomBytes(50_000)));
    const source = openS3ObjectSource(`s3://${bucket}/${prefix}`);
    try {
      await source.list();
      const object = (await source.open('a.bin'))!;
      await object.readInto(0, new Uint8Array(10));
      await put(`${prefix}a.bin`, new Uint8Array(randomBytes(50_000)));
      const error = await catchError(() => object.readInto(100, new Uint8Array(20_000)));
      expect(error.code).toBe('OBJECT_CHANGED');
      expect(error.path).toBe(`s3://${bucket}/${prefix}a.bin`);
      expect(error.details).toMatchObject({ etag: object.etag, status: 412 });
    } finally {
      await source.close();
    }
  });

  it('a server that ignores If-Match sends the new version: its ETag differs, so OBJECT_CHANGED all the same, never the new bytes', async () => {
    const prefix = nextPrefix();
    await put(`${prefix}a.bin`, new Uint8Array(randomBytes(50_000)));
    // The SDK sends If-Match; this client drops it before the request is built (a non-compliant server).
    const client = rawClient();
    client.middlewareStack.add(
      (next, context) => (args) => {
        if (context.commandName === 'GetObjectCommand') delete (args.input as { IfMatch?: string }).IfMatch;
        return next(args);
      },
      { step: 'initialize', name: 'dropIfMatch' },
    );
    const source = openS3ObjectSource(`s3://${bucket}/${prefix}`, { client });
    try {
      await source.list();
      const object = (await source.open('a.bin'))!;
      await put(`${prefix}a.bin`, new Uint8Array(randomBytes(50_000)));
      const error = await catchError(() => object.readInto(100, new Uint8Array(20_000)));
      expect(error.code).toBe('OBJECT_CHANGED');
      expect(error.details).toMatchObject({ etag: object.etag });
      expect((error.details as { got?: string }).got).not.toBe(object.etag);
    } finally {
      await source.close();
      client.destroy();
    }
  });

  it('read-through: a second source serves the same ranges from local files (its only request is the LIST), bit-exact', async () => {
    const prefix = nextPrefix();
    const bytes = new Uint8Array(randomBytes(600_000));
    await put(`${prefix}shard.safetensors`, bytes);
    const readThroughDir = await makeTempDir();
    const first = countingClient();
    const a = openS3ObjectSource(`s3://${bucket}/${prefix}`, { client: first.client, readThroughDir });
    expectSame(await readRanges(a, 'shard.safetensors', RANGES), expected(bytes));
    await a.close(); // waits for the background writes
    expect(a.readThroughStats()).toMatchObject({ hits: 0, misses: 3, written: 3, writeFailures: 0 });
    expect(first.counts.get('GetObjectCommand')).toBe(3);
    expect((await readdir(readThroughDir)).filter((name) => name.startsWith('range.'))).toHaveLength(3);

    const second = countingClient();
    const b = openS3ObjectSource(`s3://${bucket}/${prefix}`, { client: second.client, readThroughDir });
    expectSame(await readRanges(b, 'shard.safetensors', RANGES), expected(bytes));
    await b.close();
    expect(Object.fromEntries(second.counts)).toEqual({ ListObjectsV2Command: 1 });
    expect(b.readThroughStats()).toMatchObject({ hits: 3, misses: 0, written: 0 });
  });

  it('read-through: a damaged local file is detected, removed and fetched again (bit-exact)', async () => {
    const prefix = nextPrefix();
    const bytes = new Uint8Array(randomBytes(600_000));
    await put(`${prefix}shard.safetensors`, bytes);
    const readThroughDir = await makeTempDir();
    const a = openS3ObjectSource(`s3://${bucket}/${prefix}`, { readThroughDir });
    await readRanges(a, 'shard.safetensors', RANGES);
    await a.close();
    for (const name of (await readdir(readThroughDir)).filter((n) => n.startsWith('range.'))) {
      const file = await readFile(join(readThroughDir, name));
      file[file.length - 7]! ^= 0x10;
      await writeFile(join(readThroughDir, name), file);
    }
    const counted = countingClient();
    const b = openS3ObjectSource(`s3://${bucket}/${prefix}`, { client: counted.client, readThroughDir });
    expectSame(await readRanges(b, 'shard.safetensors', RANGES), expected(bytes));
    await b.close();
    expect(b.readThroughStats()).toMatchObject({ hits: 0, damaged: 3, written: 3 });
    expect(counted.counts.get('GetObjectCommand')).toBe(3);
    // The refetched copies are good again.
    const c = openS3ObjectSource(`s3://${bucket}/${prefix}`, { readThroughDir });
    expectSame(await readRanges(c, 'shard.safetensors', RANGES), expected(bytes));
    await c.close();
    expect(c.readThroughStats()).toMatchObject({ hits: 3, damaged: 0 });
  });

  it('read-through: an object replaced in S3 (same size, new ETag) is fetched again, never served from the stale local copy', async () => {
    const prefix = nextPrefix();
    const before = new Uint8Array(randomBytes(600_000));
    await put(`${prefix}shard.safetensors`, before);
    const readThroughDir = await makeTempDir();
    const a = openS3ObjectSource(`s3://${bucket}/${prefix}`, { readThroughDir });
    expectSame(await readRanges(a, 'shard.safetensors', RANGES), expected(before));
    await a.close();
    const after = new Uint8Array(randomBytes(600_000));
    await put(`${prefix}shard.safetensors`, after);
    const b = openS3ObjectSource(`s3://${bucket}/${prefix}`, { readThroughDir });
    expectSame(await readRanges(b, 'shard.safetensors', RANGES), expected(after));
    await b.close();
    expect(b.readThroughStats()).toMatchObject({ hits: 0, misses: 3, written: 3 });
  });

  it('read-through: an unwritable directory still reads correctly (write failures counted, nothing thrown)', async () => {
    const prefix = nextPrefix();
    const bytes = new Uint8Array(randomBytes(600_000));
    await put(`${prefix}shard.safetensors`, bytes);
    const base = await makeTempDir();
    await writeFile(join(base, 'file'), 'x');
    // Below a regular file: no mkdir or open can succeed there, even as root.
    const readThroughDir = join(base, 'file', 'rt');
    for (let round = 0; round < 2; round++) {
      const source = openS3ObjectSource(`s3://${bucket}/${prefix}`, { readThroughDir });
      expectSame(await readRanges(source, 'shard.safetensors', RANGES), expected(bytes));
      await source.close();
      expect(source.readThroughStats()).toMatchObject({ hits: 0, written: 0, writeFailures: 3 });
    }
  });
});
