// An S3 cache's ages (gc's orphans, the drop's quiet check and its candidates) are judged on the
// server's clock, as the SDK corrects it from each reply's Date header: this machine's clock ahead
// by more than minAgeMs made a just-written cache look old (the drop deleted a writer's young
// unbound entry, gc a running build's fresh blob). A request refused for its signing time
// (RequestTimeTooSkewed) is retried once on the corrected clock, and one that stays refused names
// the clock, not the credentials. A Last-Modified in the future says whose clock to check.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterEach, expect, it, vi } from 'vitest';
import { openCacheStore, openS3Object, type CacheStore } from '../src/index.js';
import { MIN_S3_GC_AGE_MS, type S3CacheStore } from '../src/s3-cache-store.js';
import { dropS3UnboundEntries } from '../src/s3-drop-unbound-entries.js';
import { blobObjectName, entryObjectName, stampObjectName } from '../src/s3-layout.js';
import type { HeadedObject, ListedObject, S3Transport } from '../src/s3-transport.js';
import type { CacheEntry } from '../src/types.js';
import { entryToDisk } from '../src/validate-entry.js';
import { catchError, makeTensor, toInput } from './helpers.js';
import { describeS3, endpoint, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const HOUR_MS = 3_600_000;

/** This machine's clock (Date.now, which the SDK signs with) moved by `shiftMs`; `undo` adds to it per call. */
function shiftClock(shiftMs: number, undo: () => number = () => 0): void {
  const real = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => real() + shiftMs + undo());
}

/** The SDK client the store's transport made (to read or defeat its clock correction). */
function clientOf(store: CacheStore): S3Client {
  return (store as unknown as { transport: { session: { client: S3Client } } }).transport.session.client;
}

it("the drop's look before a blob DELETE judges the blob's age on the transport's judging clock (this machine 2 h ahead: a blob stored again a second ago stays)", async () => {
  const t = makeTensor([40, 1], 990);
  const sha = createHash('sha256').update(t.payload).digest('hex');
  const [entryName, blobName] = [entryObjectName(t.key, sha), blobObjectName(t.key, sha)];
  const serverNowMs = (): number => Date.now() - 2 * HOUR_MS;
  const listed: ListedObject = { name: entryName, sizeBytes: 10, lastModifiedMs: serverNowMs() - 3 * HOUR_MS, etag: undefined };
  // The blob was stored again (a writer re-adding the key) a second ago on the server's clock.
  const blobWrittenMs = serverNowMs() - 1000;
  const present = new Set([entryName, blobName]);
  const head = (name: string): HeadedObject | undefined =>
    present.has(name) ? { sizeBytes: 10, sizeKnown: true, etag: undefined, lastModifiedMs: name === entryName ? listed.lastModifiedMs : blobWrittenMs } : undefined;
  // The entry object's bytes as a writer stores them (a drop PUTs only those that pass its checks as its intent).
  const dir = mkdtempSync(join(tmpdir(), 'skew-entry-'));
  const local = await openCacheStore(dir, { create: true });
  await local.addEntries([toInput(t, 't.weight')]);
  const entryBytes = new TextEncoder().encode(JSON.stringify({ ...entryToDisk(local.getEntry(t.key)!), slice_keys: [] }));
  await local.close();
  rmSync(dir, { recursive: true, force: true });
  const transport = {
    settings: { maxConcurrentRequests: 2 },
    judgingNowMs: serverNowMs,
    describe: (name: string) => name,
    getSmallObject: async () => entryBytes,
    headObject: async (name: string) => head(name),
    deleteObject: async (name: string, beforeAttempt?: () => Promise<boolean>) => {
      if (beforeAttempt !== undefined && !(await beforeAttempt())) return false;
      present.delete(name);
      return true;
    },
    // The drop's intent object is listed (its entry's blob may go only under the drop's own intent).
    list: async (dir: string) => [...present].filter((name) => name.startsWith(dir)).map((name) => ({ name, sizeBytes: 0, lastModifiedMs: serverNowMs(), etag: undefined })),
    putObject: async (name: string) => void present.add(name),
  } as unknown as S3Transport;
  const entry = { key: t.key, qualname: 't.weight', compBytes: 10 } as CacheEntry;
  const report = await dropS3UnboundEntries(transport, [{ object: listed, entry }], [listed], serverNowMs(), MIN_S3_GC_AGE_MS, 1 << 20);
  // The entry went (its intent PUT and entry DELETE ran): only the blob's age kept it.
  expect(present.has(entryName)).toBe(false);
  expect(present.has(blobName)).toBe(true);
  expect(report.count).toBe(0);
});

it("a denied HeadObject (a 403 with no body) whose replies' Date runs 10 min ahead is access denied, asked once: the SDK's clockSkewCorrected mark alone is no clock problem", async () => {
  let requests = 0;
  // Every reply: 403, no body, a Date 10 min ahead (a proxy's clock, or this machine 10 min behind:
  // within what S3 accepts, so the credentials were judged). The SDK marks each such reply corrected.
  const requestHandler = {
    handle: async () => {
      requests += 1;
      return { response: { statusCode: 403, headers: { date: new Date(Date.now() + 10 * 60_000).toUTCString() }, body: Readable.from([]) } };
    },
  };
  const client = new S3Client({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
    requestHandler: requestHandler as never,
    maxAttempts: 1,
  });
  try {
    const error = await catchError(() => openS3Object('s3://denied-bucket/some/object.safetensors', { client }));
    expect(error).toMatchObject({ code: 'S3_ERROR', details: { status: 403 } });
    expect(error.message).toContain('access denied');
    expect(error.message).not.toContain('clock');
    expect(requests).toBe(1);
  } finally {
    client.destroy();
  }
});

describeS3('S3 store: ages on the server clock', () => {
  const bucket = uniqueBucket('skew');
  const client = rawClient();
  let run = 0;
  useTestBucket(client, bucket);
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** A cache just written: one bound entry, one unbound (between its entry and alias PUTs, say), and a fresh orphan blob. */
  async function freshCache(options: { client?: S3Client } = {}): Promise<{ store: CacheStore; prefix: string; orphan: string }> {
    const prefix = `run${run++}/`;
    const store = await openCacheStore(`s3://${bucket}/${prefix}`, { create: true, ...(options.client ? { s3: { client: options.client } } : {}) });
    const [a, b, c] = [1, 2, 3].map((seed) => makeTensor([40, 1], 900 + seed + run * 10));
    await store.addEntries([toInput(a!, 'a.weight', [['m.safetensors', 0, 80]]), toInput(b!, 'b.weight')]);
    const orphan = `blobs/${c!.key}.${'c'.repeat(64)}.bin`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${orphan}`, Body: c!.payload }));
    return { store, prefix, orphan };
  }

  it("clock 2 h ahead: the drop keeps a just-written unbound entry (judged on the server's clock, the earlier) and gc keeps its fresh orphan blob", async () => {
    const { store, prefix, orphan } = await freshCache();
    shiftClock(2 * HOUR_MS);
    try {
      // A warm-up request: any skew correction has happened after it (it failed before the retry).
      await store.refresh().catch(() => undefined);
      // b.weight is unbound and moments old on the server's clock (2 h old on this machine's).
      expect(await (store as S3CacheStore).dropUnboundEntries({})).toMatchObject({ dryRun: false, count: 0 });
      const report = await (store as S3CacheStore).gc({ minAgeMs: MIN_S3_GC_AGE_MS });
      expect(report.orphanBlobs).toEqual([]);
    } finally {
      vi.restoreAllMocks();
    }
    await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${orphan}` }));
    expect((await store.verify()).ok).toBe(true);
    await store.close();
  }, 60_000);

  it("clock 2 h ahead: gc's look before each DELETE judges on the server's clock too: an orphan blob and stamp the listing saw old, written again since, stay", async () => {
    const { store, prefix, orphan } = await freshCache();
    const stamp = stampObjectName(['m.safetensors', 4000, 80], 'c'.repeat(40), `etag:"${'7'.repeat(32)}"`, prefix);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stamp}`, Body: new Uint8Array(0) }));
    // The listing saw older versions of both (3 h old on any clock): each was written again since.
    const transport = (store as unknown as { transport: { list(dir: string): Promise<ListedObject[]> } }).transport;
    const list = transport.list.bind(transport);
    transport.list = async (dir) => (await list(dir)).map((o) => (o.name === orphan || o.name === stamp ? { ...o, lastModifiedMs: o.lastModifiedMs - 3 * HOUR_MS } : o));
    shiftClock(2 * HOUR_MS);
    try {
      await store.refresh().catch(() => undefined);
      const report = await (store as S3CacheStore).gc({ minAgeMs: MIN_S3_GC_AGE_MS });
      expect([report.orphanBlobs, report.orphanStamps]).toEqual([[], []]);
    } finally {
      vi.restoreAllMocks();
    }
    for (const name of [orphan, stamp]) await client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${name}` }));
    await store.close();
  }, 60_000);

  it('clock 2 h ahead: the first request, refused RequestTimeTooSkewed, is retried once on the clock the SDK corrected', async () => {
    const { store } = await freshCache();
    shiftClock(2 * HOUR_MS);
    await store.refresh();
    const report = await (store as S3CacheStore).gc({ minAgeMs: MIN_S3_GC_AGE_MS, dryRun: true });
    expect(report.orphanBlobs).toEqual([]);
    vi.restoreAllMocks();
    await store.close();
  }, 60_000);

  it('a skew the SDK cannot correct: S3_ERROR names the clock, not the credentials', async () => {
    const { store } = await freshCache();
    const sdk = clientOf(store);
    // Each correction the SDK makes is undone: every request is signed 2 h ahead.
    shiftClock(2 * HOUR_MS, () => -((sdk.config as { systemClockOffset?: number }).systemClockOffset ?? 0));
    const error = await catchError(() => store.refresh());
    vi.restoreAllMocks();
    expect(error).toMatchObject({ code: 'S3_ERROR', details: { s3Code: 'RequestTimeTooSkewed', status: 403 } });
    expect(error.message).toContain("this machine's clock differs from the server's by more than S3 allows");
    // The offset the SDK holds (the test's undoing makes it grow with each correction).
    expect(error.message).toMatch(/it is [\d.]+ h ahead of the server's by its replies' Date/);
    expect(error.message).not.toContain('access denied');
    await store.close();
  }, 60_000);

  it('clock 2 h ahead: a HeadObject first (its 403 has no body, so no RequestTimeTooSkewed) is retried once on the clock the SDK corrected', async () => {
    const { store, prefix, orphan } = await freshCache();
    await store.close();
    shiftClock(2 * HOUR_MS);
    try {
      // openS3Object's first request is a HEAD of the object.
      const object = await openS3Object(`s3://${bucket}/${prefix}${orphan}`);
      expect(object.sizeBytes).toBeGreaterThan(0);
      await object.close();
    } finally {
      vi.restoreAllMocks();
    }
  }, 60_000);

  it('a skew the SDK cannot correct, met by a HeadObject: S3_ERROR names the clock, not the credentials', async () => {
    const { store, prefix, orphan } = await freshCache();
    await store.close();
    const own = new S3Client({ endpoint, forcePathStyle: true, region: process.env.AWS_REGION ?? 'us-east-1', maxAttempts: 1, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    shiftClock(2 * HOUR_MS, () => -((own.config as { systemClockOffset?: number }).systemClockOffset ?? 0));
    const error = await catchError(() => openS3Object(`s3://${bucket}/${prefix}${orphan}`, { client: own }));
    vi.restoreAllMocks();
    own.destroy();
    expect(error).toMatchObject({ code: 'S3_ERROR', details: { operation: 'HeadObject', status: 403 } });
    expect(error.message).toContain("this machine's clock differs from the server's by more than S3 allows");
    expect(error.message).not.toContain('access denied');
  }, 60_000);

  it('clock 1 h behind: a dry run reports no just-written entry (its Last-Modified is ahead of this clock: young, not old)', async () => {
    const { store } = await freshCache();
    shiftClock(-HOUR_MS);
    try {
      await store.refresh().catch(() => undefined);
      expect(await (store as S3CacheStore).dropUnboundEntries({ dryRun: true })).toMatchObject({ dryRun: true, count: 0 });
    } finally {
      vi.restoreAllMocks();
    }
    await store.close();
  }, 60_000);

  it('no correction known (a client built with disableClockSkewCorrection), clock 1 h behind: a dry run reports no just-written entry', async () => {
    const own = new S3Client({
      endpoint,
      forcePathStyle: true,
      region: process.env.AWS_REGION ?? 'us-east-1',
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      disableClockSkewCorrection: true,
    });
    const { store } = await freshCache({ client: own });
    shiftClock(-HOUR_MS);
    try {
      expect(await (store as S3CacheStore).dropUnboundEntries({ dryRun: true })).toMatchObject({ dryRun: true, count: 0 });
    } finally {
      vi.restoreAllMocks();
    }
    await store.close();
  }, 60_000);
});
