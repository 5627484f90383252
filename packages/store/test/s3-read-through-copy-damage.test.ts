// A range file's digest only proves its bytes are what a GET returned. When one copy a source served
// proves damaged, the other copies it served came from the same earlier GETs: all are dropped (the
// next source fetches them again), and the source serves no more copies. No endpoint is blamed: the
// source keeps what it fetches, and another source open on the endpoint keeps its ranges.
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, expect, it } from 'vitest';
import { openS3ObjectSource, type S3Object, type S3ObjectSource } from '../src/index.js';
import { RANGE_FILE_HEADER_BYTES } from '../src/read-through-ranges.js';
import { makeTempDir, removeTempDirs } from './helpers.js';
import { startProxy, type FaultProxy } from './s3-fault-proxy.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

type Range = readonly [offsetBytes: number, lengthBytes: number];
const A: Range = [0, 4096];
const B: Range = [4096, 100_000];
const C: Range = [200_000, 300_000];
/** Read by the damaged source only after the damage was found. */
const D: Range = [500_000, 1000];
/** Never read by the damaged source. */
const E: Range = [520_000, 2000];

/** The directory's range files, by name, with their whole contents. */
async function rangeFiles(dir: string): Promise<Map<string, Buffer>> {
  const names = (await readdir(dir)).filter((name) => name.startsWith('range.')).sort();
  return new Map(await Promise.all(names.map(async (name) => [name, await readFile(join(dir, name))] as const)));
}

/**
 * Damages the kept copy of `bytes` as a GET body damaged in transit was kept: one byte flipped, the
 * digest taken of the damaged body (the file's own check passes). Returns the file's name.
 */
async function damageCopy(dir: string, bytes: Uint8Array): Promise<string> {
  for (const [name, file] of await rangeFiles(dir)) {
    if (!file.subarray(RANGE_FILE_HEADER_BYTES).equals(bytes)) continue;
    const body = file.subarray(RANGE_FILE_HEADER_BYTES);
    body[body.length >> 1]! ^= 0x5a;
    createHash('sha256').update(body).digest().copy(file, RANGE_FILE_HEADER_BYTES - 32);
    await writeFile(join(dir, name), file);
    return name;
  }
  throw new Error(`no range file holds those ${bytes.length} bytes`);
}

describeS3('S3 object source: a damaged read-through copy drops every copy the source served', () => {
  const bucket = uniqueBucket('copydmg');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);

  /** A 600,000-byte shard and a small index below a new prefix, both single-part (MD5 ETags). */
  async function putModel(): Promise<{ prefix: string; shard: Uint8Array; index: Uint8Array }> {
    const prefix = `t${run++}/`;
    const shard = new Uint8Array(randomBytes(600_000));
    const index = new TextEncoder().encode(JSON.stringify({ weight_map: { a: 'shard.bin' }, pad: 'x'.repeat(3000) }));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}shard.bin`, Body: shard }));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}index.json`, Body: index }));
    return { prefix, shard, index };
  }

  /** A proxy in front of the gateway that records each GET as `name offset+length` (one GET per range: below partSizeBytes). */
  async function countingProxy(): Promise<FaultProxy & { gets: string[] }> {
    const gets: string[] = [];
    const proxy = await startProxy((req) => {
      if (req.method === 'GET' && !req.url?.includes('list-type')) {
        const name = new URL(req.url!, 'http://x').pathname.split('/').pop();
        const match = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers.range));
        gets.push(match ? `${name} ${match[1]}+${Number(match[2]) - Number(match[1]) + 1}` : `${name} whole`);
      }
      return false;
    });
    return { ...proxy, gets };
  }

  async function read(object: S3Object, [offset, length]: Range): Promise<Buffer> {
    const target = new Uint8Array(length);
    await object.readInto(offset, target);
    return Buffer.from(target);
  }

  async function openShard(source: S3ObjectSource): Promise<S3Object> {
    await source.list();
    return (await source.open('shard.bin'))!;
  }

  const slice = (shard: Uint8Array, [offset, length]: Range) => Buffer.from(shard.subarray(offset, offset + length));
  const got = (ranges: Range[]) => ranges.map(([offset, length]) => `shard.bin ${offset}+${length}`).sort();

  it('a copy served, found wrong, dropped and read again, reported: the other copies served are dropped, later reads fetch and keep, nothing else is touched, no endpoint blamed', async () => {
    const { prefix, shard } = await putModel();
    const proxy = await countingProxy();
    const readThroughDir = await makeTempDir();
    const url = `s3://${bucket}/${prefix}`;
    try {
      const filler = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const filled = await openShard(filler);
      for (const range of [A, B, C, D, E]) await read(filled, range);
      await filler.close();
      await damageCopy(readThroughDir, slice(shard, B));
      const before = await rangeFiles(readThroughDir);
      expect(before.size).toBe(5);
      const nameE = [...before].find(([, file]) => file.subarray(RANGE_FILE_HEADER_BYTES).equals(slice(shard, E)))![0];
      const inodeE = (await stat(join(readThroughDir, nameE))).ino;

      // Open on the same endpoint meanwhile, with a range of its own kept: blamed for nothing.
      const bystander = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      await read(await openShard(bystander), [300_000, 5000]);

      proxy.gets.length = 0;
      const source = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const object = await openShard(source);
      expect((await read(object, A)).equals(slice(shard, A))).toBe(true);
      expect((await read(object, B)).equals(slice(shard, B))).toBe(false); // the damaged copy, its digest intact
      expect((await read(object, C)).equals(slice(shard, C))).toBe(true);
      expect(proxy.gets).toEqual([]); // all three from copies
      // What the runtime does for a tensor whose bytes are not its entry's: drop, read again, compare.
      await object.dropLocalCopy(...B);
      expect((await read(object, B)).equals(slice(shard, B))).toBe(true);
      await object.reportDamage(...B);
      // A copy of the same earlier loads, not served before: fetched now, not served from the copy.
      expect((await read(object, D)).equals(slice(shard, D))).toBe(true);
      expect(proxy.gets.sort()).toEqual(got([B, D]));
      await source.close();
      // B and D fetched and kept (no distrust: the endpoint is not blamed); A's and C's copies dropped.
      expect(source.readThroughStats()).toMatchObject({ hits: 3, written: 2, dropped: 3, distrusted: 0 });
      await bystander.close();
      expect(bystander.readThroughStats()).toMatchObject({ written: 1, dropped: 0 });

      const after = await rangeFiles(readThroughDir);
      expect(after.size).toBe(4); // B, D (fetched again), E, the bystander's
      expect([...before.keys()].filter((name) => after.has(name))).toHaveLength(3); // B's, D's and E's names
      // E, which the damaged source never read, is the same file, byte for byte.
      expect(after.get(nameE)!.equals(before.get(nameE)!)).toBe(true);
      expect((await stat(join(readThroughDir, nameE))).ino).toBe(inodeE);

      // The next source fetches A and C again (they are checked again), the rest from copies, all bit-exact.
      proxy.gets.length = 0;
      const next = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const again = await openShard(next);
      for (const range of [A, B, C, D, E]) expect((await read(again, range)).equals(slice(shard, range))).toBe(true);
      await next.close();
      expect(proxy.gets.sort()).toEqual(got([A, C]));
      expect(next.readThroughStats()).toMatchObject({ hits: 3, written: 2 });
    } finally {
      await proxy.close();
    }
  });

  it('reportDamage of a copy not dropped first drops it with the others; source.reportDamage after copies were dropped does the same', async () => {
    const { prefix, shard } = await putModel();
    const proxy = await countingProxy();
    const readThroughDir = await makeTempDir();
    const url = `s3://${bucket}/${prefix}`;
    try {
      const fill = async () => {
        const filler = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
        const filled = await openShard(filler);
        for (const range of [A, B, C]) await read(filled, range);
        await filler.close();
      };
      await fill();
      await damageCopy(readThroughDir, slice(shard, B));
      const source = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const object = await openShard(source);
      for (const range of [A, B, C]) await read(object, range);
      await object.reportDamage(...B); // its latest read was the copy: that copy is among the ones dropped
      await source.close();
      expect((await rangeFiles(readThroughDir)).size).toBe(0);
      proxy.gets.length = 0;
      await fill();
      expect(proxy.gets.sort()).toEqual(got([A, B, C]));

      // An open whose parse failed: every range it read dropped and read again, then the source's reportDamage.
      await damageCopy(readThroughDir, slice(shard, B));
      const opener = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const opened = await openShard(opener);
      for (const range of [A, B]) await read(opened, range);
      for (const range of [A, B]) await opened.dropLocalCopy(...range);
      for (const range of [A, B]) await read(opened, range);
      await read(opened, C); // served from its copy (the report has not come yet)
      await opener.reportDamage();
      await opener.close();
      expect(opener.readThroughStats()).toMatchObject({ hits: 3, written: 2, distrusted: 0 });
      proxy.gets.length = 0;
      await fill();
      expect(proxy.gets).toEqual(got([C]));
    } finally {
      await proxy.close();
    }
  });

  it('a whole object’s copy that is not its MD5 (the fetched body is): the copies served before it are dropped', async () => {
    const { prefix, shard, index } = await putModel();
    const proxy = await countingProxy();
    const readThroughDir = await makeTempDir();
    const url = `s3://${bucket}/${prefix}`;
    try {
      const filler = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const filled = await openShard(filler);
      for (const range of [A, C]) await read(filled, range);
      const indexObject = (await filler.open('index.json'))!;
      await read(indexObject, [0, index.length]);
      await filler.close();
      await damageCopy(readThroughDir, index);

      const source = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const object = await openShard(source);
      for (const range of [A, C]) await read(object, range);
      expect((await read((await source.open('index.json'))!, [0, index.length])).equals(Buffer.from(index))).toBe(true);
      await source.close();
      expect(source.readThroughStats()).toMatchObject({ hits: 3, written: 1, dropped: 3, distrusted: 0 }); // the index's copy passed its digest
      proxy.gets.length = 0;
      const next = openS3ObjectSource(url, { endpoint: proxy.url, readThroughDir });
      const again = await openShard(next);
      for (const range of [A, C]) expect((await read(again, range)).equals(slice(shard, range))).toBe(true);
      expect((await read((await next.open('index.json'))!, [0, index.length])).equals(Buffer.from(index))).toBe(true);
      await next.close();
      expect(proxy.gets.sort()).toEqual(got([A, C]));
    } finally {
      await proxy.close();
    }
  });
});
