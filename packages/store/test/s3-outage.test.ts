import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { decode } from '@splitzip/codec';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { canControlGateway, cephDir, describeS3, dropBucket, gatewayPid, rawClient, uniqueBucket } from './s3-helpers.js';

/** Kills the gateway by PID and waits (bounded) until it is gone. */
async function killGateway(): Promise<void> {
  const pid = gatewayPid();
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await sleep(50);
  }
  throw new Error(`radosgw ${pid} did not exit`);
}

function restartGateway(): void {
  execFileSync('bash', [join(cephDir!, 'rgw-start.sh')], { stdio: 'ignore', timeout: 120_000 });
}

describeS3('S3 store: the gateway stops mid-read and mid-build', () => {
  const bucket = uniqueBucket('outage');
  let client: S3Client;
  beforeAll(async () => {
    client = rawClient();
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  });
  afterAll(async () => {
    // Whatever happened, leave a running gateway behind for the other test files.
    if (canControlGateway()) {
      try {
        process.kill(gatewayPid(), 0);
      } catch {
        restartGateway();
      }
    }
    await dropBucket(client, bucket);
    client.destroy();
  });

  it('a read cut off by the gateway dying fails with a typed retryable error, serves nothing, and succeeds after a restart', async (context) => {
    if (!canControlGateway()) {
      if (process.env.CI) throw new Error('CI is set but SPLITZIP_CEPH_DIR (from scripts/ceph/start-ceph.sh) is not: cannot stop the gateway');
      context.skip();
    }
    const root = `s3://${bucket}/read/`;
    const big = makeTensor([24_000_000], 11, 1024); // ~36 MiB payload: far more than socket buffers hold
    const small = makeTensor([20_000], 12); // above S3_INLINE_PAYLOAD_MAX_BYTES: its own GET
    const tiny = makeTensor([1000], 13); // inline in its entry object
    const writer = await openCacheStore(root, { create: true });
    await writer.addEntries([toInput(big, 'big'), toInput(small, 'small'), toInput(tiny, 'tiny')]);
    await writer.close();

    // Hook the first blob GET: once its response headers are in, kill the gateway before the body is read.
    const reader: CacheStore = await openCacheStore(root, { s3: { partSizeBytes: 64 * 2 ** 20, maxAttempts: 4, retryBaseDelayMs: 50, retryMaxDelayMs: 200 } });
    const entry = reader.getEntry(big.key)!;
    const slot = new Uint8Array(entry.compBytes);
    const client = (reader as unknown as { transport: { client: S3Client } }).transport.client;
    let fired = false;
    client.middlewareStack.add(
      (next, ctx) => async (args) => {
        const out = await next(args);
        if (!fired && ctx.commandName === 'GetObjectCommand') {
          fired = true;
          await killGateway();
        }
        return out;
      },
      { step: 'initialize', name: 'killGatewayMidRead' },
    );
    const error = await catchError(() => reader.readBlob(big.key, slot));
    expect(fired).toBe(true);
    expect(error.code).toBe('S3_UNAVAILABLE');
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    expect(error.message).toContain(process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL);
    // Also a small read and a listing while it is down: typed errors, nothing served.
    expect((await catchError(() => reader.readBlob(small.key, new Uint8Array(1 << 16)))).code).toBe('S3_UNAVAILABLE');
    expect((await catchError(() => reader.refresh())).code).toBe('S3_UNAVAILABLE');
    expect(reader.size).toBe(3); // what it knew stays, nothing half-applied
    // An inline payload needs no request: still served, checked, while the gateway is down.
    const tinyView = await reader.readBlob(tiny.key, new Uint8Array(1 << 16));
    expect(Buffer.from(decode(tinyView).buffer).equals(Buffer.from(tiny.bytes))).toBe(true);

    restartGateway();
    const view = await reader.readBlob(big.key, slot);
    expect(Buffer.from(decode(view).buffer).equals(Buffer.from(big.bytes))).toBe(true);
    await reader.close();
  }, 120_000);

  it('a build interrupted by the gateway dying fails typed; after a restart the rerun completes and verifies', async (context) => {
    if (!canControlGateway()) {
      if (process.env.CI) throw new Error('CI is set but SPLITZIP_CEPH_DIR is not: cannot stop the gateway');
      context.skip();
    }
    const root = `s3://${bucket}/build/`;
    const tensors = Array.from({ length: 24 }, (_, i) => makeTensor([2000 + i], 500 + i));
    const inputs = tensors.map((t, i) => toInput(t, `layer.${i}`, [['model.safetensors', i * 8192, t.bytes.length]]));
    const store = await openCacheStore(root, { create: true, s3: { maxConcurrentRequests: 2, maxAttempts: 3, retryBaseDelayMs: 50, retryMaxDelayMs: 100 } });
    await store.addEntries(inputs.slice(0, 8));
    const client = (store as unknown as { transport: { client: S3Client } }).transport.client;
    let puts = 0;
    client.middlewareStack.add(
      (next, ctx) => async (args) => {
        // The gateway dies after a few PUTs of the second batch: part of it is written.
        if (ctx.commandName === 'PutObjectCommand' && ++puts === 5) await killGateway();
        return next(args);
      },
      { step: 'initialize', name: 'killGatewayMidBuild' },
    );
    const error = await catchError(() => store.addEntries(inputs.slice(8)));
    expect(error.code).toBe('S3_UNAVAILABLE');
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    restartGateway();
    const rerun = await openCacheStore(root);
    // Whatever the interrupted batch left is complete, entry by entry.
    expect((await rerun.verify({ decode: true })).problems).toEqual([]);
    await rerun.addEntries(inputs);
    for (const [i, t] of tensors.entries()) expect(rerun.lookupBySlice('model.safetensors', i * 8192, t.bytes.length)?.key).toBe(t.key);
    const report = await rerun.verify({ decode: true });
    expect([report.ok, report.checked]).toEqual([true, tensors.length]);
    await Promise.all([store.close(), rerun.close()]);
  }, 120_000);
});
