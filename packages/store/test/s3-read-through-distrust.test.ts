// A raw range has no check of its own: a GET body damaged on the way was kept in the read-through
// directory and served from there to every later load. Once any body from the endpoint is found
// damaged (a whole object not its MD5, a cache blob's checksum, a reader's check), the source drops
// the ranges it kept and keeps no more while it is open.
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore, openS3ObjectSource, type S3ObjectSource } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';
import { relay, startProxy } from './s3-fault-proxy.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

const rangeFiles = async (dir: string) => (await readdir(dir)).filter((name) => name.startsWith('range.'));

/** Relays a GET with one byte of its body flipped (same length: nothing but a checksum sees it). */
function relayDamaged(req: IncomingMessage, res: ServerResponse): void {
  relay(req, res, (_headers, body) => {
    const bad = Buffer.from(body);
    bad[bad.length >> 1]! ^= 0x5a;
    return bad;
  });
}

describeS3('S3 object source: read-through ranges are distrusted once a body from the endpoint was found damaged', () => {
  const bucket = uniqueBucket('distrust');
  const client = rawClient();
  let run = 0;
  const nextPrefix = () => `t${run++}/`;
  const put = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  const RANGES: [number, number][] = [
    [0, 4096],
    [4096, 100_000],
    [200_000, 300_000],
  ];
  useTestBucket(client, bucket);

  async function readRange(source: S3ObjectSource, name: string, offset: number, length: number): Promise<Uint8Array> {
    const object = (await source.open(name))!;
    const target = new Uint8Array(length);
    await object.readInto(offset, target);
    return target;
  }

  /** A shard (600,000 bytes) and a small index below a new prefix, both single-part (MD5 ETags). */
  async function putModel(): Promise<{ prefix: string; shard: Uint8Array; index: Uint8Array }> {
    const prefix = nextPrefix();
    const shard = new Uint8Array(randomBytes(600_000));
    const index = new TextEncoder().encode(JSON.stringify({ weight_map: { a: 'shard.bin' }, pad: 'x'.repeat(3000) }));
    await put(`${prefix}shard.bin`, shard);
    await put(`${prefix}index.json`, index);
    return { prefix, shard, index };
  }

  it('a whole object whose first body was not its MD5 (then was): the ranges kept so far are dropped, later ones not kept; the next source keeps them', async () => {
    const { prefix, shard, index } = await putModel();
    let damage = 0;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('index.json') || damage === 0) return false;
      damage--;
      relayDamaged(req, res);
      return true;
    });
    const readThroughDir = await makeTempDir();
    try {
      const source = openS3ObjectSource(`s3://${bucket}/${prefix}`, { endpoint: proxy.url, readThroughDir });
      await source.list();
      for (const [offset, length] of RANGES) expect(Buffer.from(await readRange(source, 'shard.bin', offset, length)).equals(shard.subarray(offset, offset + length))).toBe(true);
      damage = 1;
      const got = await readRange(source, 'index.json', 0, index.length);
      expect(damage).toBe(0);
      expect(Buffer.from(got).equals(Buffer.from(index))).toBe(true);
      expect(Buffer.from(await readRange(source, 'shard.bin', 300_000, 1000)).equals(shard.subarray(300_000, 301_000))).toBe(true);
      await source.close();
      expect(await rangeFiles(readThroughDir)).toEqual([]);
      expect(source.readThroughStats()).toMatchObject({ written: 3, dropped: 3, distrusted: 2 }); // the index and the last range

      // No damage since it opened: a new source keeps what it fetches.
      const next = openS3ObjectSource(`s3://${bucket}/${prefix}`, { endpoint: proxy.url, readThroughDir });
      await next.list();
      for (const [offset, length] of RANGES) await readRange(next, 'shard.bin', offset, length);
      await next.close();
      expect(next.readThroughStats()).toMatchObject({ hits: 0, written: 3, distrusted: 0 });
      expect(await rangeFiles(readThroughDir)).toHaveLength(3);
    } finally {
      await proxy.close();
    }
  });

  it('a cache blob from the same endpoint whose body came damaged (fetched again intact): an object source open meanwhile drops its ranges at close; one damaged at rest (twice the same) blames no endpoint', async () => {
    const { prefix, shard } = await putModel();
    const tensor = makeTensor([64, 512], 11); // a blob object of its own (above the inline limit)
    const writer = await openCacheStore(`s3://${bucket}/${prefix}cache`, { create: true });
    await writer.addEntry(toInput(tensor, 'big'));
    await writer.close();
    let damage = 0;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/blobs/') || damage === 0) return false;
      damage--;
      relayDamaged(req, res);
      return true;
    });
    const readThroughDir = await makeTempDir();
    try {
      const store = await openCacheStore(`s3://${bucket}/${prefix}cache`, { s3: { endpoint: proxy.url } });
      // Damaged twice alike (as an object damaged in the bucket reads): BLOB_CORRUPT, and no endpoint blamed.
      const atRest = openS3ObjectSource(`s3://${bucket}/${prefix}`, { endpoint: proxy.url, readThroughDir });
      await atRest.list();
      for (const [offset, length] of RANGES) await readRange(atRest, 'shard.bin', offset, length);
      damage = 2;
      const error = await catchError(() => store.readBlob(tensor.key, new Uint8Array(tensor.payload.length)));
      expect(error.code).toBe('BLOB_CORRUPT');
      await atRest.close();
      expect(await rangeFiles(readThroughDir)).toHaveLength(3);
      expect(atRest.readThroughStats()).toMatchObject({ written: 3, dropped: 0 });
      // Damaged once: read again intact, served, and the endpoint's transit is distrusted.
      const source = openS3ObjectSource(`s3://${bucket}/${prefix}`, { endpoint: proxy.url, readThroughDir });
      await source.list();
      await readRange(source, 'shard.bin', 300_000, 100_000);
      damage = 1;
      const payload = await store.readBlob(tensor.key, new Uint8Array(tensor.payload.length));
      expect(Buffer.from(payload).equals(Buffer.from(tensor.payload))).toBe(true);
      await store.close();
      expect(Buffer.from(await readRange(source, 'shard.bin', 0, 4096)).equals(shard.subarray(0, 4096))).toBe(true); // a hit, still served
      await source.close();
      expect(source.readThroughStats()).toMatchObject({ written: 1, dropped: 1 });
      expect(await rangeFiles(readThroughDir)).toHaveLength(3); // the earlier source's, written before the damage
    } finally {
      await proxy.close();
    }
  });

  it('reportDamage of a range: fetched by this source, the source is distrusted; served from an earlier copy, that copy alone is dropped', async () => {
    const { prefix } = await putModel();
    const readThroughDir = await makeTempDir();
    const url = `s3://${bucket}/${prefix}`;
    const filler = openS3ObjectSource(url, { readThroughDir });
    await filler.list();
    for (const [offset, length] of RANGES) await readRange(filler, 'shard.bin', offset, length);
    await filler.close();

    // Served from a copy, dropped, read again (fetched and kept), then reported: the copy was to blame,
    // and the fetched bytes are kept.
    const copies = openS3ObjectSource(url, { readThroughDir });
    await copies.list();
    const object = (await copies.open('shard.bin'))!;
    await object.readInto(0, new Uint8Array(4096));
    await object.dropLocalCopy(0, 4096);
    await object.readInto(0, new Uint8Array(4096));
    await object.reportDamage(0, 4096);
    await copies.close();
    expect(copies.readThroughStats()).toMatchObject({ hits: 1, distrusted: 0 });
    expect(await rangeFiles(readThroughDir)).toHaveLength(3);

    // Fetched by this source (another range, no copy yet), read again, reported: its bodies are suspect.
    const fetched = openS3ObjectSource(url, { readThroughDir });
    await fetched.list();
    const again = (await fetched.open('shard.bin'))!;
    await again.readInto(500_000, new Uint8Array(1000));
    await again.dropLocalCopy(500_000, 1000);
    await again.readInto(500_000, new Uint8Array(1000));
    await again.reportDamage(500_000, 1000);
    await again.readInto(510_000, new Uint8Array(1000));
    await fetched.close();
    expect(fetched.readThroughStats()).toMatchObject({ distrusted: 1 });
    expect(await rangeFiles(readThroughDir)).toHaveLength(3); // the earlier source's alone
  });
});
