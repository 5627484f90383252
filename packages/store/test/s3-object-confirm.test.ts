// One GET that says an opened object is gone (404) or changed (another ETag) is confirmed by a
// HeadObject before it is believed: a blip of a proxy or a lagging replica no longer ends a read,
// while a real deletion or replacement is still reported, never with bytes of two versions.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DeleteObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, expect, it } from 'vitest';
import { openS3ObjectSource, OBJECT_CONFIRM_DELAY_MS, type S3Object } from '../src/index.js';
import { catchError, removeTempDirs } from './helpers.js';
import { answerError, relay, startProxy, type FaultProxy } from './s3-fault-proxy.js';
import { describeS3, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

describeS3('S3 object source: a 404 or an ETag change is confirmed before it is believed', () => {
  const bucket = uniqueBucket('confirm');
  const client = rawClient();
  let run = 0;
  const put = (key: string, body: Uint8Array) => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  useTestBucket(client, bucket);

  /**
   * An object of 200,000 random bytes behind a proxy that, once the object is opened, hands each
   * request to `fault` (which may answer it: true); returns the object opened through the proxy and
   * the requests the proxy saw since (METHOD).
   */
  async function openThroughProxy(fault: (req: IncomingMessage, res: ServerResponse, seen: string[], key: string) => boolean, partSizeBytes?: number) {
    const prefix = `t${run++}/`;
    const bytes = new Uint8Array(randomBytes(200_000));
    await put(`${prefix}a.bin`, bytes);
    const seen: string[] = [];
    let armed = false;
    const proxy: FaultProxy = await startProxy((req, res) => {
      if (!armed) return false; // the LIST
      seen.push(req.method ?? '?');
      return fault(req, res, seen, `${prefix}a.bin`);
    });
    const source = openS3ObjectSource(`s3://${bucket}/${prefix}`, { endpoint: proxy.url, maxAttempts: 2, retryBaseDelayMs: 5, retryMaxDelayMs: 10, ...(partSizeBytes === undefined ? {} : { partSizeBytes }) });
    await source.list();
    const object = (await source.open('a.bin')) as S3Object;
    armed = true;
    return {
      prefix,
      bytes,
      object,
      seen,
      close: async () => {
        await source.close();
        await proxy.close();
      },
    };
  }

  it('one GET answered 404 for an object that is there: a HeadObject finds it, and the read is made again, bit-exact', async () => {
    let faults = 0;
    const t = await openThroughProxy((req, res) => {
      if (req.method !== 'GET' || faults > 0) return false;
      faults++;
      answerError(res, 404, 'NoSuchKey');
      return true;
    });
    try {
      const target = new Uint8Array(50_000);
      const started = performance.now();
      await t.object.readInto(1000, target);
      expect(Buffer.from(target).equals(Buffer.from(t.bytes.subarray(1000, 51_000)))).toBe(true);
      expect(t.seen).toEqual(['GET', 'HEAD', 'GET']);
      expect(performance.now() - started).toBeGreaterThanOrEqual(OBJECT_CONFIRM_DELAY_MS - 50);
    } finally {
      await t.close();
    }
  });

  it('one GET whose reply names another ETag (a proxy, a lagging replica): confirmed by a HeadObject, read again, bit-exact', async () => {
    let faults = 0;
    const t = await openThroughProxy((req, res) => {
      if (req.method !== 'GET' || faults > 0) return false;
      faults++;
      relay(req, res, (headers, body) => {
        headers.etag = '"00000000000000000000000000000000"';
        return body;
      });
      return true;
    });
    try {
      const target = new Uint8Array(50_000);
      await t.object.readInto(1000, target);
      expect(Buffer.from(target).equals(Buffer.from(t.bytes.subarray(1000, 51_000)))).toBe(true);
      expect(t.seen).toEqual(['GET', 'HEAD', 'GET']);
    } finally {
      await t.close();
    }
  });

  it('a 404 that the HeadObject confirms is OBJECT_MISSING, after one HEAD and no further GET (bounded)', async () => {
    const t = await openThroughProxy((req, res) => {
      answerError(res, 404, 'NoSuchKey');
      return true;
    });
    try {
      const error = await catchError(() => t.object.readInto(0, new Uint8Array(10)));
      expect(error.code).toBe('OBJECT_MISSING');
      expect(error.path).toBe(`s3://${bucket}/${t.prefix}a.bin`);
      expect(t.seen).toEqual(['GET', 'HEAD']);
    } finally {
      await t.close();
    }
  });

  it('a 404 the object really answers (deleted): OBJECT_MISSING; deleted and put back with other bytes: OBJECT_CHANGED, never the new bytes', async () => {
    const t = await openThroughProxy(() => false);
    try {
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${t.prefix}a.bin` }));
      const missing = await catchError(() => t.object.readInto(0, new Uint8Array(10)));
      expect(missing.code).toBe('OBJECT_MISSING');
      expect(t.seen).toEqual(['GET', 'HEAD']);

      // Gone at the GET, back (another version) by the HEAD: replaced, not a blip.
      const again = await openThroughProxy((req, res, seen, key) => {
        if (req.method === 'HEAD' && seen.length === 2) {
          void put(key, new Uint8Array(randomBytes(200_000))).then(() => relay(req, res, (_headers, body) => body));
          return true;
        }
        if (req.method !== 'GET' || seen.length !== 1) return false;
        answerError(res, 404, 'NoSuchKey');
        return true;
      });
      try {
        const target = new Uint8Array(10_000);
        const changed = await catchError(() => again.object.readInto(0, target));
        expect(changed.code).toBe('OBJECT_CHANGED');
        expect(changed.details).toMatchObject({ etag: again.object.etag });
        expect(again.seen).toEqual(['GET', 'HEAD']);
        expect(target.every((byte) => byte === 0)).toBe(true);
      } finally {
        await again.close();
      }
    } finally {
      await t.close();
    }
  });

  it('an object replaced mid-read (412 on If-Match) is OBJECT_CHANGED once the HeadObject shows the new ETag', async () => {
    const t = await openThroughProxy(() => false);
    try {
      await put(`${t.prefix}a.bin`, new Uint8Array(randomBytes(200_000)));
      const error = await catchError(() => t.object.readInto(100, new Uint8Array(20_000)));
      expect(error.code).toBe('OBJECT_CHANGED');
      expect(error.details).toMatchObject({ etag: t.object.etag, status: 412 });
      expect(t.seen).toEqual(['GET', 'HEAD']);
    } finally {
      await t.close();
    }
  });

  it('a read of several parts, one answered 404: the other parts are called off and settled before the read is made again, so none writes into the buffer after readInto returned', async () => {
    const part = 65_536;
    let faulted = false;
    let delayed = false;
    const t = await openThroughProxy((req, res) => {
      if (req.method !== 'GET') return false;
      const from = Number(/bytes=(\d+)-/.exec(req.headers.range ?? '')?.[1] ?? 0);
      if (from === 0 && !faulted) {
        faulted = true;
        answerError(res, 404, 'NoSuchKey');
        return true;
      }
      if (from === part && !delayed) {
        // The first attempt's second part, slow: it was still writing after the first read failed.
        delayed = true;
        setTimeout(() => relay(req, res, (_headers, body) => body), 1_500);
        return true;
      }
      return false;
    }, part);
    try {
      const target = new Uint8Array(t.bytes.length);
      await t.object.readInto(0, target);
      expect(Buffer.from(target).equals(Buffer.from(t.bytes))).toBe(true);
      // The caller takes its buffer back (a staging slot for the next tensor).
      target.fill(0xaa);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(target.every((byte) => byte === 0xaa)).toBe(true);
    } finally {
      await t.close();
    }
  });
});
