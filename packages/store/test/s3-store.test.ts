import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { readFile, writeFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { CreateMultipartUploadCommand, DeleteObjectCommand, GetObjectCommand, ListMultipartUploadsCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { decode } from '@splitzip/codec';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore, S3_INLINE_PAYLOAD_MAX_BYTES, type CacheStore } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';
import { startProxy, relay } from './s3-fault-proxy.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

afterEach(removeTempDirs);

function blobName(prefix: string, entry: { key: string; blobSha256: string | null }): string {
  return `${prefix}blobs/${entry.key}.${entry.blobSha256}.bin`;
}

function expectBitExact(store: CacheStore, tensor: TestTensor, view: Uint8Array): void {
  const entry = store.getEntry(tensor.key)!;
  expect(view.length).toBe(entry.compBytes);
  expect(Buffer.from(decode(view).buffer).equals(Buffer.from(tensor.bytes))).toBe(true);
}

describe('S3 store without a server', () => {
  it('an endpoint that refuses connections gives a typed, retryable S3_UNAVAILABLE naming the endpoint', async () => {
    // A port nobody listens on: bind, note it, close.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const started = Date.now();
    // Credentials are needed to sign the request at all (the connection is refused afterwards).
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID ??= 'UNUSEDTESTACCESSKEY0';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'unused-test-secret';
    const error = await catchError(() =>
      openCacheStore('s3://nobody-home/cache', { s3: { endpoint: `http://127.0.0.1:${port}`, maxAttempts: 3, retryBaseDelayMs: 10, retryMaxDelayMs: 20 } }),
    );
    if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
    if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
    expect(error.code).toBe('S3_UNAVAILABLE');
    expect((error as { retryable?: boolean }).retryable).toBe(true);
    expect(error.message).toContain(`http://127.0.0.1:${port}`);
    expect(error.details).toMatchObject({ attempts: 3, endpoint: `http://127.0.0.1:${port}` });
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('rejects malformed s3:// roots', async () => {
    for (const url of ['s3://', 's3://A_bad_bucket/x', 's3://ok-bucket/a/../b']) {
      expect((await catchError(() => openCacheStore(url))).code, url).toBe('INVALID_ARGUMENT');
    }
  });
});

describeS3('S3 store against the gateway', () => {
  const bucket = uniqueBucket('store');
  const client = rawClient();
  let run = 0;
  const url = (prefix: string) => `s3://${bucket}/${prefix}`;
  const nextPrefix = () => `t${run++}/`;

  useTestBucket(client, bucket);

  it('a missing cache is NOT_A_CACHE; create: true makes one, with the builder defaults', async () => {
    const prefix = nextPrefix();
    expect((await catchError(() => openCacheStore(url(prefix)))).code).toBe('NOT_A_CACHE');
    const store = await openCacheStore(url(prefix), { create: true, chunkSize: 256, coverageMin: 0.95 });
    expect(store.size).toBe(0);
    await store.close();
    const again = await openCacheStore(url(prefix));
    expect([again.chunkSize, again.coverageMin, again.root]).toEqual([256, 0.95, url(prefix)]);
    await again.close();
    expect((await catchError(() => again.refresh())).code).toBe('STORE_CLOSED');
  });

  it('builds entries into S3, verifies them, and another instance reads every one back bit-exact', async () => {
    const prefix = nextPrefix();
    const shapes = [[0], [1], [7], [3, 5], [64], [65], [2, 3, 37], [1000], [4097]];
    const tensors = shapes.map((shape, i) => makeTensor(shape, 100 + i));
    const writer = await openCacheStore(url(prefix), { create: true });
    // recordBlobSha256: false is a local-cache choice: S3 object names carry the digest, so it is recorded anyway.
    // onPayloadWritten: once per entry, before the entries are listed (committed); the memory is
    // the caller's again then, so scribbling on it must not change what was stored.
    const originals = tensors.map((t) => t.payload.slice());
    const written: [number, boolean][] = [];
    const results = await writer.addEntries(
      tensors.map((t, i) => ({
        ...toInput(t, `layer.${i}`, [[`model-0000${i % 2}.safetensors`, i * 65536, t.bytes.length]]),
        recordBlobSha256: i % 2 === 0,
        onPayloadWritten: () => {
          written.push([i, writer.getEntry(t.key) !== undefined]);
          t.payload.fill(0x5a);
        },
      })),
    );
    expect(results.map((r) => r.added)).toEqual(tensors.map(() => true));
    expect(written.sort((x, y) => x[0] - y[0])).toEqual(tensors.map((_, i) => [i, false]));
    tensors.forEach((t, i) => (t.payload = originals[i]!));
    for (const t of tensors) expect(writer.getEntry(t.key)?.blobSha256).toMatch(/^[0-9a-f]{64}$/);
    // Re-adding is a no-op.
    expect((await writer.addEntries(tensors.slice(0, 2).map((t) => toInput(t, 'again')))).map((r) => r.added)).toEqual([false, false]);
    const report = await writer.verify({ decode: true });
    expect(report.problems).toEqual([]);
    expect([report.ok, report.checked, report.decoded]).toEqual([true, tensors.length, tensors.length]);

    const reader = await openCacheStore(url(prefix));
    expect(reader.size).toBe(tensors.length);
    const slot = new Uint8Array(1 << 20);
    for (const [i, t] of tensors.entries()) {
      const entry = reader.lookupBySlice(`model-0000${i % 2}.safetensors`, i * 65536, t.bytes.length);
      expect(entry?.key).toBe(t.key);
      expect(entry?.qualname).toBe(`layer.${i}`);
      expect(reader.lookup(t.bytes, t.shape, 'BF16')?.key).toBe(t.key);
      expectBitExact(reader, t, await reader.readBlob(t.key, slot));
    }
    expect((await catchError(() => reader.readBlob(tensors[8]!.key, new Uint8Array(10)))).code).toBe('SLOT_TOO_SMALL');
    expect((await catchError(() => reader.readBlob('0'.repeat(40), slot))).code).toBe('ENTRY_NOT_FOUND');
    await Promise.all([writer.close(), reader.close()]);
  });

  it('aliases: absent → false, idempotent, SLICE_CONFLICT, rebind; a concurrent conflicting alias resolves to nothing until rebound', async () => {
    const prefix = nextPrefix();
    const [a, b] = [makeTensor([40], 1), makeTensor([40], 2)];
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntries([toInput(a, 'a'), toInput(b, 'b')]);
    expect(await store.aliasSlice('f'.repeat(40), 's.safetensors', 0, 80)).toBe(false);
    expect(await store.aliasSlice(a.key, 's.safetensors', 0, 80)).toBe(true);
    expect(await store.aliasSlice({ bytes: a.bytes, shape: a.shape, dtype: 'BF16' }, 's.safetensors', 0, 80)).toBe(true);
    expect((await catchError(() => store.aliasSlice(b.key, 's.safetensors', 0, 80))).code).toBe('SLICE_CONFLICT');
    expect((await catchError(() => store.aliasSlice(b.key, 's.safetensors', 0, 82))).code).toBe('SLICE_SIZE_MISMATCH');
    expect(await store.aliasSlices([{ key: b.key, shardName: 's.safetensors', offsetBytes: 0, sizeBytes: 80 }], { rebind: true })).toEqual([true]);
    const other = await openCacheStore(url(prefix));
    expect(other.lookupBySlice('s.safetensors', 0, 80)?.key).toBe(b.key);
    expect(other.getEntry(a.key)?.sliceKeys).toEqual([]);

    // Two hosts alias one slice to different keys without seeing each other: write the second
    // alias object by hand next to the first (same epoch). Readers must serve neither.
    expect(await store.aliasSlice(a.key, 'race.safetensors', 4096, 80)).toBe(true);
    const dir = `${prefix}slices/${Buffer.from('race.safetensors').toString('base64url')}/4096-80/`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${dir}0000000000.${b.key}`, Body: new Uint8Array(0) }));
    await other.refresh();
    expect(other.lookupBySlice('race.safetensors', 4096, 80)).toBeUndefined();
    const report = await other.verify();
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => p.code)).toEqual(['SLICE_CONFLICT']);
    expect((await catchError(() => other.aliasSlice(a.key, 'race.safetensors', 4096, 80))).code).toBe('SLICE_CONFLICT');
    expect(await other.aliasSlices([{ key: a.key, shardName: 'race.safetensors', offsetBytes: 4096, sizeBytes: 80 }], { rebind: true })).toEqual([true]);
    await store.refresh();
    expect(store.lookupBySlice('race.safetensors', 4096, 80)?.key).toBe(a.key);
    expect((await store.verify()).ok).toBe(true);
    await Promise.all([store.close(), other.close()]);
  });

  it('a corrupted, truncated, swapped or missing blob object and a damaged entry object are detected, never decoded', async () => {
    const prefix = nextPrefix();
    // Payloads above S3_INLINE_PAYLOAD_MAX_BYTES: read from their blob objects (inline ones: the next test).
    const tensors = [0, 1, 2, 3].map((i) => makeTensor([12_000 + i], 50 + i));
    expect(tensors.every((t) => t.payload.length > S3_INLINE_PAYLOAD_MAX_BYTES)).toBe(true);
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntries(tensors.map((t, i) => toInput(t, `t${i}`)));
    const entries = tensors.map((t) => store.getEntry(t.key)!);
    const slot = new Uint8Array(1 << 16);
    // Flipped byte in the codes section.
    const flipped = Uint8Array.from(tensors[0]!.payload.subarray(0, entries[0]!.compBytes));
    flipped[flipped.length - 3]! ^= 0x10;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[0]!), Body: flipped }));
    // Truncated.
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[1]!), Body: tensors[1]!.payload.subarray(0, 100) }));
    // Missing.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[2]!) }));
    // Another tensor's intact payload of the same size under this name.
    const swapped = makeTensor([12_003], 999);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[3]!), Body: swapped.payload }));
    const codes = [];
    for (const t of tensors) codes.push((await catchError(() => store.readBlob(t.key, slot))).code);
    expect(codes[0]).toBe('BLOB_CORRUPT');
    expect(codes[1]).toBe('BLOB_SIZE_MISMATCH');
    expect(codes[2]).toBe('BLOB_MISSING');
    // checkBlob (a HEAD): the size is wrong or the object gone; bytes of the right size pass it.
    expect((await catchError(() => store.checkBlob(tensors[1]!.key))).code).toBe('BLOB_SIZE_MISMATCH');
    expect((await catchError(() => store.checkBlob(tensors[2]!.key))).code).toBe('BLOB_MISSING');
    await store.checkBlob(tensors[0]!.key);
    expect(['META_MISMATCH', 'BLOB_SIZE_MISMATCH']).toContain(codes[3]);
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => p.code).sort()).toEqual([...codes].sort());
    // Found from the blob listing, before a buffer is sized from the entry's comp_bytes (an entry
    // may claim ~4 GiB for a blob that is not there; verify allocated it first).
    expect(report.problems.find((p) => p.key === tensors[2]!.key)!.message).toContain('the listing of blobs/ has no blob object for it');
    expect(report.problems.find((p) => p.key === tensors[1]!.key)!.message).toContain('gives its blob object 100 bytes');

    // An entry object that is not valid JSON is never served and is reported.
    const bad = makeTensor([12], 7);
    await store.addEntry(toInput(bad, 'bad'));
    const badEntry = store.getEntry(bad.key)!;
    const fresh = await openCacheStore(url(prefix));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}entries/${bad.key}.${badEntry.blobSha256}.json`, Body: '{"qualname": 1' }));
    const viewer = await openCacheStore(url(prefix));
    expect(viewer.getEntry(bad.key)).toBeUndefined();
    const viewerReport = await viewer.verify();
    expect(viewerReport.problems.some((p) => p.key === bad.key && p.code === 'ENTRY_INVALID')).toBe(true);

    // Nor one that repeats a field (JSON.parse would keep the last one silently).
    const dup = makeTensor([12], 8);
    await store.addEntry(toInput(dup, 'dup'));
    const dupName = `${prefix}entries/${dup.key}.${store.getEntry(dup.key)!.blobSha256}.json`;
    const original = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: dupName }))).Body!.transformToString();
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: dupName, Body: original.replace('{', '{"qualname":"other",') }));
    const dupViewer = await openCacheStore(url(prefix));
    expect(dupViewer.getEntry(dup.key)).toBeUndefined();
    const dupReport = await dupViewer.verify();
    expect(dupReport.problems.find((p) => p.key === dup.key)).toMatchObject({ code: 'ENTRY_INVALID', message: expect.stringContaining('repeats the key "qualname"') });
    await Promise.all([store.close(), fresh.close(), viewer.close(), dupViewer.close()]);
  });

  it('repairBlob puts back a corrupted, truncated or missing blob object from its payload, refuses other bytes, and leaves an intact one alone', async () => {
    const prefix = nextPrefix();
    const tensors = [0, 1, 2].map((i) => makeTensor([12_000 + i], 70 + i));
    const store = await openCacheStore(url(prefix), { create: true });
    await store.addEntries(tensors.map((t, i) => toInput(t, `r${i}`)));
    const entries = tensors.map((t) => store.getEntry(t.key)!);
    const flipped = Uint8Array.from(tensors[0]!.payload.subarray(0, entries[0]!.compBytes));
    flipped[flipped.length - 3]! ^= 0x10;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[0]!), Body: flipped }));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[1]!), Body: tensors[1]!.payload.subarray(0, 100) }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: blobName(prefix, entries[2]!) }));
    expect((await store.verify()).problems).toHaveLength(3);
    expect((await catchError(() => store.repairBlob(tensors[0]!.key, tensors[1]!.payload))).code).toBe('INVALID_ARGUMENT');
    for (const t of tensors) expect(await store.repairBlob(t.key, t.payload.subarray(0, store.getEntry(t.key)!.compBytes))).toBe(true);
    expect(await store.repairBlob(tensors[0]!.key, tensors[0]!.payload.subarray(0, entries[0]!.compBytes))).toBe(false);
    const other = await openCacheStore(url(prefix));
    expect((await other.verify({ decode: true })).ok).toBe(true);
    const slot = new Uint8Array(1 << 16);
    for (const t of tensors) expectBitExact(other, t, await other.readBlob(t.key, slot));
    await Promise.all([store.close(), other.close()]);
  });

  it('small payloads travel inline in their entry objects: read without a GET, checked against the blob, a damaged copy refused and reported', async () => {
    const prefix = nextPrefix();
    const tiny = makeTensor([300], 61);
    const edge = makeTensor([1], 62);
    const large = makeTensor([20_000], 63);
    expect(tiny.payload.length).toBeLessThanOrEqual(S3_INLINE_PAYLOAD_MAX_BYTES);
    expect(large.payload.length).toBeGreaterThan(S3_INLINE_PAYLOAD_MAX_BYTES);
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntries([toInput(tiny, 'tiny'), toInput(edge, 'edge'), toInput(large, 'large')]);
    const entryJson = async (t: TestTensor) => {
      const e = writer.getEntry(t.key)!;
      const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}entries/${t.key}.${e.blobSha256}.json` }));
      return JSON.parse(await out.Body!.transformToString()) as Record<string, unknown>;
    };
    expect(Buffer.from((await entryJson(tiny)).inline_payload as string, 'base64').equals(Buffer.from(tiny.payload))).toBe(true);
    expect((await entryJson(large)).inline_payload).toBeUndefined();

    // A fresh reader: the tiny payloads come with the entries, the large one by GET.
    const reader = await openCacheStore(url(prefix));
    const gets: string[] = [];
    const readerClient = (reader as unknown as { transport: { client: S3Client } }).transport.client;
    readerClient.middlewareStack.add(
      (next, ctx) => async (args) => {
        if (ctx.commandName === 'GetObjectCommand') gets.push(String((args.input as { Key?: string }).Key));
        return next(args);
      },
      { step: 'initialize', name: 'countGets' },
    );
    const slot = new Uint8Array(1 << 16);
    expectBitExact(reader, tiny, await reader.readBlob(tiny.key, slot));
    expectBitExact(reader, edge, await reader.readBlob(edge.key, slot));
    expect(gets).toEqual([]);
    expectBitExact(reader, large, await reader.readBlob(large.key, slot));
    expect(gets).toHaveLength(1);
    expect((await catchError(() => reader.readBlob(tiny.key, new Uint8Array(tiny.payload.length - 1)))).code).toBe('SLOT_TOO_SMALL');

    // The blob object stays the source of truth: verify reads it (a missing one is reported) while the inline copy still serves.
    const tinyEntry = reader.getEntry(tiny.key)!;
    const blobBytes = tiny.payload.slice();
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: blobName(prefix, tinyEntry) }));
    expectBitExact(reader, tiny, await reader.readBlob(tiny.key, slot));
    await reader.checkBlob(tiny.key); // the inline copy answers, as it serves the read
    expect((await reader.verify()).problems.map((p) => p.code)).toEqual(['BLOB_MISSING']);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName(prefix, tinyEntry), Body: blobBytes }));

    // A damaged inline copy (other bytes than the blob's) is never served: the blob is read, verify reports the entry object.
    const damaged = await entryJson(tiny);
    const bytes = Buffer.from(damaged.inline_payload as string, 'base64');
    bytes[bytes.length - 1]! ^= 0x01;
    damaged.inline_payload = bytes.toString('base64');
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}entries/${tiny.key}.${tinyEntry.blobSha256}.json`, Body: JSON.stringify(damaged) }));
    const viewer = await openCacheStore(url(prefix));
    expectBitExact(viewer, tiny, await viewer.readBlob(tiny.key, slot));
    const report = await viewer.verify();
    expect(report.ok).toBe(false);
    expect(report.problems.some((p) => p.key === tiny.key && p.code === 'ENTRY_INVALID' && p.message.includes('inline_payload'))).toBe(true);
    await Promise.all([writer.close(), reader.close(), viewer.close()]);
  });

  it('a big blob goes up as a multipart upload and comes back through parallel ranged GETs, bit-exact', async () => {
    const prefix = nextPrefix();
    const big = makeTensor([3_500_000], 5, 1024); // ~5.3 MiB payload, above the 5 MiB multipart threshold
    const store = await openCacheStore(url(prefix), { create: true, s3: { multipartThresholdBytes: 5 * 2 ** 20, partSizeBytes: 200_000, maxConcurrentRequests: 4 } });
    expect(big.payload.length).toBeGreaterThan(5 * 2 ** 20);
    await store.addEntry(toInput(big, 'big'));
    const slot = new Uint8Array(store.getEntry(big.key)!.compBytes + 17);
    expectBitExact(store, big, await store.readBlob(big.key, slot));
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.close();
  });

  it('the read-through directory serves a second read locally, and a damaged local copy is fetched again', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const t = makeTensor([20_000], 77); // above S3_INLINE_PAYLOAD_MAX_BYTES: read from its blob object
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(t, 'rt'));
    const entry = store.getEntry(t.key)!;
    const slot = new Uint8Array(entry.compBytes);
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    // Besides the blob: the entry object's local copy (object.<…>.bin).
    const files = (await readdir(dir)).filter((f) => !f.startsWith('.') && !f.startsWith('object.'));
    expect(files).toEqual([`${t.key}.${entry.blobSha256}.bin`]);
    // With the object gone from S3, the local copy still serves.
    const object = blobName(prefix, entry);
    const original = await readFile(join(dir, files[0]!));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: object }));
    slot.fill(0);
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    await store.checkBlob(t.key); // the local copy answers, as it serves the read
    // A damaged local copy is not served: with S3 lacking the object too, the read fails.
    const damaged = Uint8Array.from(original);
    damaged[damaged.length - 1]! ^= 1;
    await writeFile(join(dir, files[0]!), damaged);
    expect((await catchError(() => store.readBlob(t.key, slot))).code).toBe('BLOB_MISSING');
    // Object back in S3: the damaged local copy is replaced by a verified one.
    await writeFile(join(dir, files[0]!), damaged);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: object, Body: original }));
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    expect(Buffer.from(await readFile(join(dir, files[0]!))).equals(original)).toBe(true);
    // Reads: a miss (fetched, written), a hit, a damaged copy (S3 lacking the object), another, then fetched and written.
    expect(store.readThroughStats?.()).toEqual({ hits: 1, misses: 1, damaged: 2, written: 2, writeFailures: 0 });
    // A caller that verifies the checksum itself (verifyChecksum: false) is served the damaged copy
    // (a hit by the store's checks); the copy it then discards counts as damaged, and is fetched again.
    await writeFile(join(dir, files[0]!), damaged);
    await store.readBlob(t.key, slot, { verifyChecksum: false });
    await store.discardLocalCopy!(t.key);
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    expect(store.readThroughStats?.()).toEqual({ hits: 2, misses: 2, damaged: 3, written: 3, writeFailures: 0 });
    await store.close();
  });

  it('a read-through copy that cannot be written (directory made unwritable) does not fail the read, and is counted', async () => {
    const prefix = nextPrefix();
    const parent = await makeTempDir();
    const dir = join(parent, 'rt');
    const t = makeTensor([20_000], 79);
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(t, 'rt-full'));
    // The entry object's local copy is written in the background: done first, or it makes the
    // directory again between the rm and the writeFile below (EISDIR, seen once in a CI dry run).
    await (store as unknown as { entryCopies: { settle(): Promise<void> } }).entryCopies.settle();
    // A regular file where the directory must go: every write fails (as a full disk does), the read does not.
    await rm(dir, { recursive: true, force: true });
    await writeFile(dir, 'not a directory');
    const slot = new Uint8Array(store.getEntry(t.key)!.compBytes);
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    expect(store.readThroughStats?.()).toMatchObject({ hits: 0, written: 0, writeFailures: 1 });
    await store.close();
    // Without a directory there is nothing to count.
    const plain = await openCacheStore(url(prefix));
    expect(plain.readThroughStats?.()).toBeUndefined();
    await plain.close();
  });

  it('a reader that verifies while decoding gets local copies unchecked and drops a damaged one with discardLocalCopy', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const t = makeTensor([20_000], 78); // above S3_INLINE_PAYLOAD_MAX_BYTES: read from its blob object
    const store = await openCacheStore(url(prefix), { create: true, s3: { readThroughDir: dir } });
    await store.addEntry(toInput(t, 'rt-unchecked'));
    const entry = store.getEntry(t.key)!;
    const blobFile = join(dir, `${t.key}.${entry.blobSha256}.bin`);
    const slot = new Uint8Array(entry.compBytes);
    expectBitExact(store, t, await store.readBlob(t.key, slot, { verifyChecksum: false })); // fetched, kept locally
    const original = await readFile(blobFile);
    // A flipped byte past the header: the unchecked read hands it over as it is, the caller's decode catches it.
    const damaged = Uint8Array.from(original);
    damaged[damaged.length - 1]! ^= 1;
    await writeFile(blobFile, damaged);
    const got = await store.readBlob(t.key, slot, { verifyChecksum: false });
    expect(Buffer.from(got).equals(Buffer.from(damaged))).toBe(true);
    expect((await catchError(() => decode(got))).code).toBe('CHECKSUM_MISMATCH');
    await store.discardLocalCopy!(t.key);
    await expect(readFile(blobFile)).rejects.toMatchObject({ code: 'ENOENT' });
    expectBitExact(store, t, await store.readBlob(t.key, slot, { verifyChecksum: false })); // fetched again
    expect(Buffer.from(await readFile(blobFile)).equals(original)).toBe(true);
    // A checked read (the default) still judges every local copy: the damaged one is replaced.
    await writeFile(blobFile, damaged);
    expectBitExact(store, t, await store.readBlob(t.key, slot));
    expect(Buffer.from(await readFile(blobFile)).equals(original)).toBe(true);
    await store.discardLocalCopy!('0'.repeat(40)); // an unknown key: nothing to drop
    await store.close();
  });

  it('entry objects are read from the read-through directory when their listed ETag matches, fetched otherwise', async () => {
    const prefix = nextPrefix();
    const dir = await makeTempDir();
    const tensors = [0, 1, 2].map((i) => makeTensor([3000 + i], 400 + i));
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntries(tensors.map((t, i) => toInput(t, `e${i}`)));
    await writer.close();
    // Count the GETs of entry objects through a forwarding proxy.
    let entryGets = 0;
    const proxy = await startProxy((req) => {
      if (req.method === 'GET' && req.url?.includes('/entries/')) entryGets++;
      return false;
    });
    try {
      const s3 = { endpoint: proxy.url, readThroughDir: dir };
      const first = await openCacheStore(url(prefix), { s3 });
      expect(first.size).toBe(3);
      expect(entryGets).toBe(3);
      await first.close();
      const copies = (await readdir(dir)).filter((f) => f.startsWith('object.')).sort();
      expect(copies).toHaveLength(3);
      // A second instance on this host: no GET of an entry object, every entry there and readable.
      const second = await openCacheStore(url(prefix), { s3 });
      expect(entryGets).toBe(3);
      for (const t of tensors) expectBitExact(second, t, await second.readBlob(t.key, new Uint8Array(second.getEntry(t.key)!.compBytes)));
      await second.close();
      // A damaged local copy (its bytes no longer the digest its file carries) is fetched again and replaced.
      const victim = join(dir, copies[0]!);
      const good = await readFile(victim);
      const bad = Uint8Array.from(good);
      bad[bad.length - 1]! ^= 1;
      await writeFile(victim, bad);
      const third = await openCacheStore(url(prefix), { s3 });
      expect(entryGets).toBe(4);
      expect(third.size).toBe(3);
      expect((await third.verify()).ok).toBe(true);
      const entry = third.getEntry(tensors[1]!.key)!;
      await third.close();
      expect(Buffer.from(await readFile(victim)).equals(good)).toBe(true);
      // Another version of an entry object (rewritten by another host: other bytes, another ETag) is fetched, not the copy.
      const filesBefore = (await readdir(dir)).length;
      const objectKey = `${prefix}entries/${entry.key}.${entry.blobSha256}.json`;
      const body = await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: objectKey }))).Body!.transformToString();
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: objectKey, Body: body.replace('"qualname":"e1"', '"qualname":"e1-again"') }));
      const fourth = await openCacheStore(url(prefix), { s3 });
      expect(entryGets).toBe(5);
      expect(fourth.getEntry(entry.key)!.qualname).toBe('e1-again');
      await fourth.close(); // local copies are written in the background: close waits for them
      expect((await readdir(dir)).length).toBe(filesBefore + 1);
    } finally {
      await proxy.close();
    }
  });

  it('gc removes old orphan blobs and stray multipart uploads, reports unknown objects, honours dryRun and minAgeMs', async () => {
    const prefix = nextPrefix();
    const store = await openCacheStore(url(prefix), { create: true });
    const kept = makeTensor([33], 1);
    await store.addEntry(toInput(kept, 'kept'));
    const orphan = makeTensor([34], 2);
    const orphanName = `${prefix}blobs/${orphan.key}.${'a'.repeat(64)}.bin`;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: orphanName, Body: orphan.payload }));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}notes.txt`, Body: 'hello' }));
    const upload = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${prefix}blobs/${orphan.key}.${'b'.repeat(64)}.bin` }));
    const young = await store.gc();
    expect([young.orphanBlobs, young.tempFiles]).toEqual([[], []]);
    expect(young.unknownFiles).toEqual(['notes.txt']);
    const dry = await gcBelowFloorForTests(store, { dryRun: true });
    expect(dry.orphanBlobs).toEqual([orphanName.slice(prefix.length)]);
    expect(dry.tempFiles).toHaveLength(1);
    expect(dry.tempFiles[0]).toContain(upload.UploadId!);
    const done = await gcBelowFloorForTests(store);
    expect(done.orphanBlobs).toEqual(dry.orphanBlobs);
    expect(done.orphanBytes).toBe(orphan.payload.length);
    const after = await gcBelowFloorForTests(store);
    expect([after.orphanBlobs, after.tempFiles, after.unknownFiles]).toEqual([[], [], ['notes.txt']]);
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix }));
    expect(uploads.Uploads ?? []).toEqual([]);
    expect((await store.verify({ decode: true })).ok).toBe(true);
    await store.close();
  });

  it('gc keeps an orphan blob whose entry a writer commits while gc runs (it deleted it from its stale listing: the committed entry lost its bytes)', async () => {
    const prefix = nextPrefix();
    const gcStore = await openCacheStore(url(prefix), { create: true });
    const tensor = makeTensor([40], 9);
    const blobName = `${prefix}blobs/${tensor.key}.${createHash('sha256').update(tensor.payload).digest('hex')}.bin`;
    // Left by a writer that crashed between its blob PUT and its entry PUT.
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobName, Body: tensor.payload }));
    const writer = await openCacheStore(url(prefix));
    // The rerun commits right after gc's listing was taken, before gc deletes.
    const transport = (gcStore as unknown as { transport: { list: (dir: string) => Promise<unknown> } }).transport;
    const list = transport.list.bind(transport);
    transport.list = async (dir: string) => {
      const listed = await list(dir);
      if (dir === '') await writer.addEntry(toInput(tensor, 'rerun'));
      return listed;
    };
    const report = await gcBelowFloorForTests(gcStore);
    expect(report.orphanBlobs).toEqual([]);
    expect(report.orphanBytes).toBe(0);
    const reader = await openCacheStore(url(prefix));
    expect(reader.getEntry(tensor.key)).toBeDefined();
    expect((await reader.verify()).ok).toBe(true);
    await Promise.all([gcStore.close(), writer.close(), reader.close()]);
  });

  it('gc looks again before a retried DELETE: a blob whose entry is committed while the first DELETE fails (503) is kept', async () => {
    const prefix = nextPrefix();
    const tensor = makeTensor([41], 10);
    const blobKey = `${prefix}blobs/${tensor.key}.${createHash('sha256').update(tensor.payload).digest('hex')}.bin`;
    // Left by a writer that crashed between its blob PUT and its entry PUT.
    await (await openCacheStore(url(prefix), { create: true })).close();
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: blobKey, Body: tensor.payload }));
    const writer = await openCacheStore(url(prefix));
    let deletes = 0;
    // The first DELETE of the blob stalls while the rerun commits the same blob and its entry, then fails with 503.
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'DELETE' || !req.url?.includes('/blobs/') || deletes++ > 0) return false;
      void writer.addEntry(toInput(tensor, 'rerun')).then(() => {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>');
      });
      return true;
    });
    try {
      const gcStore = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url, retryBaseDelayMs: 5, retryMaxDelayMs: 10 } });
      const report = await gcBelowFloorForTests(gcStore);
      expect(report.orphanBlobs).toEqual([]);
      const reader = await openCacheStore(url(prefix));
      expect(reader.getEntry(tensor.key)).toBeDefined();
      expect((await reader.verify()).problems).toEqual([]);
      expect(deletes).toBe(1);
      await Promise.all([gcStore.close(), writer.close(), reader.close()]);
    } finally {
      await proxy.close();
    }
  });

  it('verify with every blob GET answered 503 is S3_UNAVAILABLE (named once), not a report of bad entries', async () => {
    const prefix = nextPrefix();
    const tensor = makeTensor([20_000], 11);
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntry(toInput(tensor, 'w'));
    await writer.close();
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/blobs/')) return false;
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>');
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url, maxAttempts: 2, retryBaseDelayMs: 5, retryMaxDelayMs: 10 } });
      const error = await catchError(() => store.verify());
      expect(error.code).toBe('S3_UNAVAILABLE');
      expect(error.message.match(/S3_UNAVAILABLE/g)).toHaveLength(1);
      expect(error.message).toContain(proxy.url);
      await store.close();
    } finally {
      await proxy.close();
    }
  });

  it('GET replies without Content-Length (chunked) are read: cache.json, entry objects and blobs; a chunked blob that ends short is BLOB_SIZE_MISMATCH', async () => {
    const prefix = nextPrefix();
    const small = makeTensor([20_000], 21); // above S3_INLINE_PAYLOAD_MAX_BYTES: its own blob GET
    const tiny = makeTensor([100], 22); // inline in its entry object
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntries([toInput(small, 'small'), toInput(tiny, 'tiny')]);
    await writer.close();
    let mode: 'chunked' | 'short' = 'chunked';
    let edited = 0;
    const proxy = await startProxy((req, res) => {
      if ((req.method !== 'GET' && req.method !== 'HEAD') || req.url?.includes('list-type')) return false;
      relay(req, res, (headers, body) => {
        edited++;
        delete headers['content-length'];
        return mode === 'short' && req.url?.includes('/blobs/') ? body.subarray(0, body.length - 10) : body;
      });
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url } });
      expect(store.size).toBe(2);
      for (const t of [small, tiny]) expectBitExact(store, t, await store.readBlob(t.key, new Uint8Array(1 << 17)));
      expect((await store.verify({ decode: true })).problems).toEqual([]);
      // A HEAD without Content-Length says the blob is there, not its size: checkBlob passes (the read checks the size).
      const before = edited;
      await store.checkBlob(small.key);
      expect(edited).toBe(before + 1);
      expect(edited).toBeGreaterThanOrEqual(5); // cache.json, two entry objects, blob reads, the HEAD
      mode = 'short';
      const entry = store.getEntry(small.key)!;
      const error = await catchError(() => store.readBlob(small.key, new Uint8Array(1 << 17)));
      expect(error.code).toBe('BLOB_SIZE_MISMATCH');
      expect(error.details).toMatchObject({ objectBytes: entry.compBytes - 10, expectedBytes: entry.compBytes });
      await store.close();
    } finally {
      await proxy.close();
    }
  });

  it('an entry object reply garbled on the way is fetched again at the next refresh (it hid the entry, and its slice said "bound concurrently", for the store\'s lifetime)', async () => {
    const prefix = nextPrefix();
    const first = makeTensor([300], 23);
    const second = makeTensor([301], 24);
    const writer = await openCacheStore(url(prefix), { create: true });
    await writer.addEntry(toInput(first, 'first'));
    await writer.close();
    // Twice in a row: a reply garbled once is fetched again at once (s3-reply-faults.test.ts).
    let garble = 2;
    const proxy = await startProxy((req, res) => {
      if (req.method !== 'GET' || !req.url?.includes('/entries/') || garble === 0) return false;
      garble--;
      relay(req, res, (headers, body) => {
        const cut = body.subarray(0, 20);
        headers['content-length'] = String(cut.length);
        return cut;
      });
      return true;
    });
    try {
      const store = await openCacheStore(url(prefix), { s3: { endpoint: proxy.url } });
      expect(store.getEntry(first.key)).toBeUndefined(); // the garbled reply is not served
      await store.refresh();
      expect(store.getEntry(first.key)).toBeDefined();
      expectBitExact(store, first, await store.readBlob(first.key, new Uint8Array(1 << 16)));
      // A writer whose own entry object comes back garbled: not a slice bound elsewhere.
      garble = 2;
      const error = await catchError(() => store.addEntry(toInput(second, 'second', [['m.safetensors', 0, second.bytes.length]])));
      expect(error.code).toBe('ENTRY_INVALID');
      expect(error.message).toContain('not readable');
      await store.addEntry(toInput(second, 'second', [['m.safetensors', 0, second.bytes.length]]));
      expect(store.lookupBySlice('m.safetensors', 0, second.bytes.length)?.key).toBe(second.key);
      await store.close();
    } finally {
      await proxy.close();
    }
  });

  describe('transient faults', () => {
    let proxy: { url: string; close(): Promise<void> };
    let proxyUrl: string;
    let injected = 0;
    beforeAll(async () => {
      // The first attempt of every request gets 503 SlowDown, the second a connection reset; the third passes.
      const attempts = new Map<string, number>();
      proxy = await startProxy((req, res) => {
        const id = `${req.method} ${req.url} ${req.headers.range ?? ''}`;
        const n = attempts.get(id) ?? 0;
        attempts.set(id, n + 1);
        if (n % 3 === 0) {
          injected++;
          res.writeHead(503, { 'content-type': 'application/xml' });
          res.end('<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>');
          return true;
        }
        if (n % 3 === 1) {
          injected++;
          req.socket.destroy();
          return true;
        }
        return false;
      });
      proxyUrl = proxy.url;
    });
    afterAll(() => proxy.close());

    it('5xx throttling and connection resets are retried with backoff: every operation still succeeds', async () => {
      const prefix = nextPrefix();
      const s3 = { endpoint: proxyUrl, maxAttempts: 8, retryBaseDelayMs: 5, retryMaxDelayMs: 40 };
      const tensors = [0, 1, 2, 3, 4, 5].map((i) => makeTensor([500 + i], 300 + i));
      const store = await openCacheStore(url(prefix), { create: true, s3 });
      await store.addEntries(tensors.map((t, i) => toInput(t, `f${i}`, [['f.safetensors', i * 4096, t.bytes.length]])));
      const reader = await openCacheStore(url(prefix), { s3 });
      const slot = new Uint8Array(1 << 16);
      for (const t of tensors) expectBitExact(reader, t, await reader.readBlob(t.key, slot));
      expect((await reader.verify({ decode: true })).ok).toBe(true);
      expect(injected).toBeGreaterThan(10);
      await Promise.all([store.close(), reader.close()]);
    });
  });
});
