import type { S3Client } from '@aws-sdk/client-s3';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { S3_INLINE_PAYLOAD_MAX_BYTES, type S3StoreOptions } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isRuntimeError, loadModel, openShardCache, type LoadedTensor } from '../src/index.js';
import { buildCache, readAllRaw, sameBytes } from './fixtures.js';
import {
  canControlGateway,
  createBucket,
  describeS3,
  dropBucket,
  isGatewayRunning,
  killGateway,
  rawClient,
  restartGateway,
  uniqueBucket,
  uploadDirectory,
  waitGatewayGone,
} from './helpers/s3.js';

// Short retries so that an outage turns into a typed error in well under a second per request.
const FAST_FAIL: S3StoreOptions = { maxAttempts: 2, retryBaseDelayMs: 20, retryMaxDelayMs: 50, connectTimeoutMs: 1000, requestTimeoutMs: 5000 };

describeS3('runtime from S3: the gateway stopped mid-load', () => {
  const bucket = uniqueBucket('outage');
  const modelUrl = `s3://${bucket}/models/default`;
  const cacheUrl = `s3://${bucket}/cache`;
  let client: S3Client;
  let local: SafetensorsModel;
  let truth: Map<string, Uint8Array>;
  let keys: Map<string, string>;

  beforeAll(async () => {
    client = rawClient();
    await createBucket(client, bucket);
    const modelDir = await ensureDefaultModel();
    await uploadDirectory(client, bucket, 'models/default/', modelDir);
    local = await openSafetensorsModel(modelDir);
    truth = await readAllRaw(local);
    keys = await buildCache(local, cacheUrl);
  });
  afterAll(async () => {
    // Whatever happened, leave a running gateway for the other test files.
    if (canControlGateway() && !isGatewayRunning()) restartGateway();
    await local?.close();
    await dropBucket(client, bucket);
    client.destroy();
  });

  const checkDelivered = (delivered: LoadedTensor[]) => {
    for (const t of delivered) expect(sameBytes(t.data, truth.get(t.name)!), `${t.name} (${t.source}, ${t.reason})`).toBe(true);
  };

  it('local model, s3:// cache: tensors after the kill fall back to raw (CACHE_UNAVAILABLE, retryable), all bit-exact; cacheOnly is typed; after a restart the cache serves again', async (context) => {
    if (!canControlGateway()) {
      if (process.env.CI) throw new Error('CI is set but SPLITZIP_CEPH_DIR (from scripts/ceph/start-ceph.sh) is not: cannot stop the gateway');
      context.skip();
    }
    // Built from these very files: trusted unchecked (their check, one raw read per tensor, is another test's).
    const cache = await openShardCache(cacheUrl, { s3: FAST_FAIL, fileSources: 'trust' });
    // Payloads up to S3_INLINE_PAYLOAD_MAX_BYTES came with their entry objects: served without a request, outage or not.
    const inline = new Set([...keys].filter(([, key]) => cache.getEntry(key)!.compBytes <= S3_INLINE_PAYLOAD_MAX_BYTES).map(([name]) => name));
    expect(inline.size).toBeGreaterThan(0);
    expect(inline.size).toBeLessThan(keys.size);
    try {
      const delivered: LoadedTensor[] = [];
      let killedAt = -1;
      // One tensor at a time, so every cached tensor after the kill meets the outage.
      const load = loadModel(local, cache, {
        concurrency: 1,
        onTensor: (t) => {
          delivered.push(t);
          if (killedAt < 0 && t.source === 'cache') {
            killedAt = delivered.length;
            killGateway();
          }
        },
      });
      await load.drain();
      await waitGatewayGone();
      expect(killedAt).toBeGreaterThan(0);
      expect(delivered.length).toBe(local.tensors.length);
      checkDelivered(delivered);
      const after = delivered.slice(killedAt).filter((t) => keys.has(t.name) && !inline.has(t.name));
      expect(after.length).toBeGreaterThan(0);
      for (const t of after) {
        expect(t.source).toBe('raw');
        expect(t.reason).toBe('cache-failed');
        expect(t.report.error?.code).toBe('CACHE_UNAVAILABLE');
      }
      for (const t of delivered.filter((d) => inline.has(d.name))) expect(t.source).toBe('cache');
      expect(load.totals.fallbacks).toBe(after.length);

      // While it is down: the refresh fails retryably and the load goes on with the snapshot (raw fallback)…
      const down = loadModel(local, cache);
      await down.drain();
      expect(down.totals.refreshError?.code).toBe('S3_UNAVAILABLE');
      expect(down.totals.fallbacks).toBe(keys.size - inline.size);
      expect(down.totals.fromCache).toBe(inline.size);
      // …while cacheOnly gives the typed, retryable error, and opening a cache is retryable too.
      const error = await loadModel(local, cache, { cacheOnly: true }).drain().catch((e: unknown) => e);
      expect(isRuntimeError(error, 'CACHE_UNAVAILABLE')).toBe(true);
      expect((error as { retryable: boolean }).retryable).toBe(true);
      await expect(openShardCache(cacheUrl, { s3: FAST_FAIL })).rejects.toMatchObject({ code: 'CACHE_UNAVAILABLE', retryable: true });
    } finally {
      await cache.close();
    }

    restartGateway();
    const again = await openShardCache(cacheUrl, { fileSources: 'trust' });
    try {
      const delivered: LoadedTensor[] = [];
      const load = loadModel(local, again, { onTensor: (t) => delivered.push(t), verifyDigest: true });
      await load.drain();
      checkDelivered(delivered);
      expect(load.totals.fromCache).toBe(keys.size);
      expect(load.totals.fallbacks).toBe(0);
    } finally {
      await again.close();
    }
  });

  it('s3:// model and cache on the stopped gateway: a typed retryable error, nothing wrong delivered; bit-exact after a restart', async (context) => {
    if (!canControlGateway()) {
      if (process.env.CI) throw new Error('CI is set but SPLITZIP_CEPH_DIR (from scripts/ceph/start-ceph.sh) is not: cannot stop the gateway');
      context.skip();
    }
    const cache = await openShardCache(cacheUrl, { s3: FAST_FAIL });
    try {
      const delivered: LoadedTensor[] = [];
      const load = loadModel(modelUrl, cache, {
        modelS3: FAST_FAIL,
        onTensor: (t) => {
          delivered.push(t);
          if (delivered.length === 3) killGateway();
        },
      });
      const error = await load.drain().catch((e: unknown) => e);
      await waitGatewayGone();
      // The cache failure falls back to raw, whose ranged GET meets the same outage: SHARD_READ_FAILED, retryable.
      expect(isRuntimeError(error, 'SHARD_READ_FAILED')).toBe(true);
      expect((error as { retryable: boolean }).retryable).toBe(true);
      expect(delivered.length).toBeGreaterThanOrEqual(3);
      expect(delivered.length).toBeLessThan(local.tensors.length);
      checkDelivered(delivered);
      // Opening the model while it is down is typed and retryable as well.
      await expect(loadModel(modelUrl, null, { modelS3: FAST_FAIL }).drain()).rejects.toMatchObject({ code: 'MODEL_OPEN_FAILED', retryable: true });
    } finally {
      await cache.close();
    }

    restartGateway();
    const again = await openShardCache(cacheUrl);
    try {
      const delivered: LoadedTensor[] = [];
      const load = loadModel(modelUrl, again, { onTensor: (t) => delivered.push(t) });
      await load.drain();
      expect(delivered.length).toBe(local.tensors.length);
      checkDelivered(delivered);
      // The cached tensors the interrupted load had not checked against the model's objects yet are checked now (raw once).
      expect(load.totals.fromCache + load.totals.byReason.unchecked).toBe(keys.size);
      expect(load.totals.fallbacks).toBe(0);
    } finally {
      await again.close();
    }
  });
});
