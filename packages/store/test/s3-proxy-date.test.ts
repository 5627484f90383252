// A reply's Date header may come from a clock ahead of the one that stamps Last-Modified: a proxy
// such as nginx in front of the gateway sets its own Date, and nodes behind a load balancer may
// disagree. The SDK's offset then says the server's time is later than it is; judged by it, a
// just-written object looked minutes old and gc deleted a fresh orphan blob. Ages are judged by
// the earlier of this machine's clock and the server's Date, so a Date ahead changes nothing.
import { HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { makeTensor, toInput } from './helpers.js';
import { describeS3, endpoint, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const PROXY_AHEAD_MS = 10 * 60_000;
const MIN_AGE_MS = 5 * 60_000;

/** An SDK client whose every reply carries a Date `aheadMs` ahead of the gateway's (as a proxy in front would set it). */
function clientBehindProxy(aheadMs: number): S3Client {
  const inner = new NodeHttpHandler();
  const handler = {
    handle: async (...args: Parameters<NodeHttpHandler['handle']>) => {
      const out = await inner.handle(...args);
      out.response.headers.date = new Date(Date.now() + aheadMs).toUTCString();
      return out;
    },
    updateHttpClientConfig: () => undefined,
    httpHandlerConfigs: () => ({}),
    destroy: () => inner.destroy(),
  } as unknown as NodeHttpHandler;
  return new S3Client({
    endpoint,
    forcePathStyle: true,
    region: process.env.AWS_REGION ?? 'us-east-1',
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: handler,
  });
}

describeS3('S3 store: a Date header from a clock ahead (a proxy\'s)', () => {
  const bucket = uniqueBucket('pxdate');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);

  async function freshCache(): Promise<{ store: S3CacheStore; prefix: string; orphan: string; own: S3Client }> {
    const prefix = `run${run++}/`;
    const own = clientBehindProxy(PROXY_AHEAD_MS);
    const store = (await openCacheStore(`s3://${bucket}/${prefix}`, { create: true, s3: { client: own } })) as S3CacheStore;
    const [a, b, c] = [1, 2, 3].map((seed) => makeTensor([40, 1], 980 + seed + run * 10));
    // One bound entry, one unbound (a writer between its entry and alias PUTs), a fresh orphan blob.
    await store.addEntries([toInput(a!, 'a.weight', [['m.safetensors', 0, 80]]), toInput(b!, 'b.weight')]);
    const orphan = `blobs/${c!.key}.${'c'.repeat(64)}.bin`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${orphan}`, Body: c!.payload }));
    return { store, prefix, orphan, own };
  }

  it('Date 10 min ahead: gc (minAgeMs 5 min) keeps an orphan blob written a moment ago', async () => {
    const { store, prefix, orphan, own } = await freshCache();
    const report = await store.gc({ minAgeMs: MIN_AGE_MS, allowMinAgeBelowFloorForTests: true });
    // The SDK took the proxy's Date for the server's time.
    expect((own.config as { systemClockOffset?: number }).systemClockOffset).toBeGreaterThan(PROXY_AHEAD_MS / 2);
    expect(report.orphanBlobs).toEqual([]);
    await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${orphan}` }));
    await store.close();
    own.destroy();
  }, 60_000);

  it('Date 10 min ahead: the drop keeps the unbound entry written a moment ago (younger than minAgeMs on either clock)', async () => {
    const { store, own } = await freshCache();
    const report = await store.dropUnboundEntries({ minAgeMs: MIN_AGE_MS, allowMinAgeBelowFloorForTests: true });
    expect(report).toMatchObject({ dryRun: false, count: 0 });
    expect((await store.verify()).ok).toBe(true);
    await store.close();
    own.destroy();
  }, 60_000);
});
