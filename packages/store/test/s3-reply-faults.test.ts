// One bad reply of the gateway (a 404 for an object that exists, a body cut short or garbled on
// the way) is no evidence about the cache: it must neither rewrite the cache's settings nor fail a
// build, while an object that is really damaged still fails. And gc refuses an age floor under
// which it would delete the blobs of a writer still at work.
import { createServer, type Socket } from 'node:net';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { MIN_S3_GC_AGE_MS, type S3CacheStore } from '../src/s3-cache-store.js';
import { MAX_SILENT_ATTEMPTS } from '../src/s3-transport.js';
import { catchError, makeTensor, removeTempDirs, toInput } from './helpers.js';
import { answerError, relay, relayCut, startProxy } from './s3-fault-proxy.js';
import { describeS3, ensureTestCredentials, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

/** Fast retries: a fault that persists ends in a second or so. */
const quick = { maxAttempts: 3, retryBaseDelayMs: 5, retryMaxDelayMs: 20 };

describe('S3 endpoint faults without a gateway', () => {
  beforeAll(ensureTestCredentials);
  it('an endpoint host that does not resolve (ENOTFOUND) is S3_UNAVAILABLE after the retries, like a refused connection', async () => {
    const error = await catchError(() => openCacheStore('s3://nobody-home/cache', { s3: { endpoint: 'http://splitzip-no-such-host.invalid:9000', ...quick } }));
    expect(error.code).toBe('S3_UNAVAILABLE');
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    expect(error.message).toContain('splitzip-no-such-host.invalid');
    expect(error.details).toMatchObject({ attempts: 3 });
  });
});

/** A TCP server on 127.0.0.1 that does `onConnection` with each socket (and never closes one itself). */
async function startTcpServer(onConnection: (socket: Socket) => void): Promise<{ url: string; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server = createServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('S3 endpoints that answer nothing', () => {
  beforeAll(ensureTestCredentials);
  it('an endpoint that accepts connections and never answers is S3_UNAVAILABLE after MAX_SILENT_ATTEMPTS, not maxAttempts, idle timeouts', async () => {
    const server = await startTcpServer(() => undefined);
    try {
      const error = await catchError(() => openCacheStore('s3://silent/cache', { s3: { endpoint: server.url, maxAttempts: 6, retryBaseDelayMs: 5, retryMaxDelayMs: 10, requestTimeoutMs: 150 } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.message).toContain('MAX_SILENT_ATTEMPTS');
      expect(error.details).toMatchObject({ attempts: MAX_SILENT_ATTEMPTS, endpoint: server.url });
      expect(server.connections()).toBe(MAX_SILENT_ATTEMPTS);
    } finally {
      await server.close();
    }
  });

  it('an endpoint that has answered once and then goes silent (a failover, a blip) keeps every attempt', async () => {
    // A long build rode out ~3 minutes of silence on maxAttempts; capping every request at
    // MAX_SILENT_ATTEMPTS failed it after ~60 s. The cap is for an endpoint never heard from.
    let connection = 0;
    const server = await startTcpServer((socket) => {
      if (connection++ > 0) return; // silent from the second connection on
      socket.once('data', () => socket.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    });
    try {
      // requestTimeoutMs 1 s: the 503 must be read within it on a loaded machine, or it counts as silence.
      const error = await catchError(() => openCacheStore('s3://blip/cache', { s3: { endpoint: server.url, maxAttempts: 5, retryBaseDelayMs: 5, retryMaxDelayMs: 10, requestTimeoutMs: 1000 } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.message).not.toContain('MAX_SILENT_ATTEMPTS');
      expect(error.details).toMatchObject({ attempts: 5 });
      expect(server.connections()).toBe(5);
    } finally {
      await server.close();
    }
  });

  it('a refused connection is no answer: an endpoint that then accepts and hangs is still capped', async () => {
    // Nobody listens at first (a server restarting), then a server that accepts and never answers.
    const probe = await startTcpServer(() => undefined);
    const port = Number(new URL(probe.url).port);
    await probe.close();
    const sockets = new Set<Socket>();
    const hanging = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    const listening = new Promise<void>((resolve) => setTimeout(() => hanging.listen(port, '127.0.0.1', resolve), 60));
    try {
      // The first attempt is refused at once; the retry after it (150-300 ms) finds the hanging server.
      const error = await catchError(() => openCacheStore('s3://restarting/cache', { s3: { endpoint: probe.url, maxAttempts: 6, retryBaseDelayMs: 300, retryMaxDelayMs: 300, requestTimeoutMs: 150 } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.message).toContain('MAX_SILENT_ATTEMPTS');
      expect(error.details).toMatchObject({ attempts: 1 + MAX_SILENT_ATTEMPTS });
    } finally {
      await listening;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => hanging.close(() => resolve()));
    }
  });

  it('a reply whose body stalls after its headers keeps every attempt (a slow server is not a dead one)', async () => {
    const server = await startTcpServer((socket) => {
      socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"layout"'));
    });
    try {
      const error = await catchError(() => openCacheStore('s3://stalled/cache', { s3: { endpoint: server.url, maxAttempts: 4, retryBaseDelayMs: 5, retryMaxDelayMs: 10, requestTimeoutMs: 150 } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.details).toMatchObject({ attempts: 4 });
      expect(server.connections()).toBe(4);
    } finally {
      await server.close();
    }
  });
});

describeS3('S3 reply faults', () => {
  const bucket = uniqueBucket('faults');
  const client = rawClient();
  let run = 0;
  const url = (prefix: string) => `s3://${bucket}/${prefix}`;
  const nextPrefix = () => `f${run++}/`;
  const readHeader = async (prefix: string) => JSON.parse(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json` }))).Body!.transformToString());

  useTestBucket(client, bucket);

  it('a 404 for an existing cache.json makes a creator take the cache\'s settings, never rewrite them', async () => {
    const prefix = nextPrefix();
    await (await openCacheStore(url(prefix), { create: true, coverageMin: 0.99, chunkSize: 1024 })).close();
    let fake404 = 1;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/cache.json') || fake404 === 0) return false;
      fake404--;
      answerError(res, 404, 'NoSuchKey');
      return true;
    });
    try {
      // A build asking another gate: the store reports the cache's, so the builder says SETTINGS_MISMATCH.
      const store = await openCacheStore(url(prefix), { create: true, coverageMin: 0.5, chunkSize: 256, s3: { endpoint: proxy.url } });
      expect(fake404).toBe(0);
      expect([store.coverageMin, store.chunkSize]).toEqual([0.99, 1024]);
      await store.close();
    } finally {
      await proxy.close();
    }
    expect(await readHeader(prefix)).toMatchObject({ coverage_min: 0.99, chunk_size: 1024 });
  });

  it('two creators racing with different settings agree on the one cache.json that stays', async () => {
    const prefix = nextPrefix();
    // Both look before either writes (their GETs answer 404 together), then both create.
    let held: (() => void)[] | undefined = [];
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/cache.json') || held === undefined) return false;
      held.push(() => answerError(res, 404, 'NoSuchKey'));
      if (held.length === 2) {
        for (const answer of held) answer();
        held = undefined;
      }
      return true;
    });
    try {
      const s3 = { endpoint: proxy.url };
      const [a, b] = await Promise.all([
        openCacheStore(url(prefix), { create: true, coverageMin: 0.5, s3 }),
        openCacheStore(url(prefix), { create: true, coverageMin: 0.9, s3 }),
      ]);
      const stored = (await readHeader(prefix)).coverage_min;
      expect([a.coverageMin, b.coverageMin]).toEqual([stored, stored]);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await proxy.close();
    }
  });

  it('a cache.json that exists but keeps answering 404 ends in S3_UNAVAILABLE, never in a new cache.json', async () => {
    const prefix = nextPrefix();
    await (await openCacheStore(url(prefix), { create: true, coverageMin: 0.99 })).close();
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/cache.json')) return false;
      answerError(res, 404, 'NoSuchKey');
      return true;
    });
    try {
      const error = await catchError(() => openCacheStore(url(prefix), { create: true, coverageMin: 0.5, s3: { endpoint: proxy.url, ...quick } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
    } finally {
      await proxy.close();
    }
    expect((await readHeader(prefix)).coverage_min).toBe(0.99);
  });

  it('a missing bucket is NOT_A_CACHE naming the bucket', async () => {
    const missing = uniqueBucket('absent');
    const error = await catchError(() => openCacheStore(`s3://${missing}/cache`));
    expect(error.code).toBe('NOT_A_CACHE');
    expect(error.message).toContain(`bucket ${missing} does not exist`);
    expect(error.details).toMatchObject({ bucket: missing });
  });

  it('a cache.json reply cut short once is fetched again; a damaged cache.json is still MANIFEST_INVALID', async () => {
    const prefix = nextPrefix();
    await (await openCacheStore(url(prefix), { create: true, coverageMin: 0.9 })).close();
    let cuts = 1;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/cache.json') || cuts === 0) return false;
      cuts--;
      relayCut(req, res, 20);
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url } });
      expect(store.coverageMin).toBe(0.9);
      await store.close();
    } finally {
      await proxy.close();
    }
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}cache.json`, Body: '{"layout":"s3-obj' }));
    expect((await catchError(() => openCacheStore(url(prefix)))).code).toBe('MANIFEST_INVALID');
  });

  it('a LIST reply cut short or garbled is retried; one that stays garbled is S3_UNAVAILABLE', async () => {
    const prefix = nextPrefix();
    const tensor = makeTensor([64], 3);
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntry(toInput(tensor, 't'));
    await writer.close();
    let cuts = 2;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('list-type=2') || cuts === 0) return false;
      cuts--;
      relayCut(req, res, 120);
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url } });
      expect(cuts).toBe(0);
      expect(store.getEntry(tensor.key)).toBeDefined();
      await store.close();
      cuts = Number.POSITIVE_INFINITY;
      const error = await catchError(() => openCacheStore(url(prefix), { s3: { endpoint: proxy.url, ...quick } }));
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.details).toMatchObject({ operation: 'ListObjectsV2', attempts: 3 });
    } finally {
      await proxy.close();
    }
  });

  it('a writer whose own entry object comes back cut short once binds its slice; twice in a row it is ENTRY_INVALID', async () => {
    const prefix = nextPrefix();
    const first = makeTensor([80], 5);
    const second = makeTensor([81], 6);
    let cuts = 0;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/entries/') || cuts === 0) return false;
      cuts--;
      relayCut(req, res, 20);
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { create: true, s3: { endpoint: proxy.url } });
      cuts = 1;
      await store.addEntry(toInput(first, 'first', [['m.safetensors', 0, first.bytes.length]]));
      expect(cuts).toBe(0);
      expect(store.lookupBySlice('m.safetensors', 0, first.bytes.length)?.key).toBe(first.key);
      cuts = 2;
      const error = await catchError(() => store.addEntry(toInput(second, 'second', [['m.safetensors', 4096, second.bytes.length]])));
      expect(error.code).toBe('ENTRY_INVALID');
      await store.close();
    } finally {
      await proxy.close();
    }
  });

  it('gc refuses a minAgeMs under MIN_S3_GC_AGE_MS (a writer may be between its blob and entry PUTs), dry run too', async () => {
    const prefix = nextPrefix();
    const store = await openCacheStore(url(prefix), { create: true });
    for (const options of [{ minAgeMs: 0 }, { minAgeMs: MIN_S3_GC_AGE_MS - 1 }, { minAgeMs: 1000, dryRun: true }]) {
      const error = await catchError(() => store.gc(options));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain('MIN_S3_GC_AGE_MS');
      expect(error.details).toEqual({ option: 'minAgeMs', minAgeMs: options.minAgeMs, floor: MIN_S3_GC_AGE_MS });
    }
    expect((await catchError(() => store.gc({ minAgeMs: Number.NaN }))).code).toBe('INVALID_ARGUMENT');
    expect((await store.gc({ minAgeMs: MIN_S3_GC_AGE_MS })).orphanBlobs).toEqual([]);
    expect((await store.gc()).orphanBlobs).toEqual([]);
    // The tests' way under the floor, for orphans made on purpose with no writer at work.
    const orphan = makeTensor([90], 7);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}blobs/${orphan.key}.${'c'.repeat(64)}.bin`, Body: orphan.payload }));
    expect((await gcBelowFloorForTests(store)).orphanBlobs).toEqual([`blobs/${orphan.key}.${'c'.repeat(64)}.bin`]);
    expect((await (store as S3CacheStore).gc({ minAgeMs: 0, allowMinAgeBelowFloorForTests: false }).catch((e: { code: string }) => e.code))).toBe('INVALID_ARGUMENT');
    await store.close();
  });

  it('verify checks a blob found bad once more before reporting it: a body damaged in transit is no damage of the cache', async () => {
    const prefix = nextPrefix();
    const tensor = makeTensor([64, 512], 11); // a blob object of its own (above the inline limit)
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntry(toInput(tensor, 'big'));
    await writer.close();
    let damage = 1;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/blobs/') || damage === 0) return false;
      damage--;
      relay(req, res, (_headers, body) => {
        const bad = Buffer.from(body);
        bad[bad.length >> 1]! ^= 0x10; // same length, one bit off
        return bad;
      });
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url } });
      const report = await store.verify({ decode: true });
      expect(damage).toBe(0);
      expect(report.problems).toEqual([]);
      expect(report).toMatchObject({ ok: true, checked: 1, passed: 1 });
      // Damaged on every read: still reported.
      damage = 2;
      const bad = await store.verify();
      expect(bad.ok).toBe(false);
      expect(bad.problems).toHaveLength(1);
      expect(bad.passed).toBe(0);
      await store.close();
    } finally {
      await proxy.close();
    }
  });
});
