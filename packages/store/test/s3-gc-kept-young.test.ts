// gc of an s3:// cache says what it kept as younger than minAgeMs (GcReport.keptYoung), a dry run
// included: before, a dry run with the default --min-age showed nothing to remove and no sign of
// the orphans a later gc would take.
import { CreateMultipartUploadCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import { blobObjectName, stampObjectName } from '../src/s3-layout.js';
import type { ListedObject } from '../src/s3-transport.js';
import { makeTensor, toInput } from './helpers.js';
import { describeS3, gcBelowFloorForTests, rawClient, uniqueBucket, useTestBucket } from './s3-helpers.js';

const HOUR_MS = 3_600_000;

describeS3('S3 store: gc reports what it kept as younger than minAgeMs', () => {
  const bucket = uniqueBucket('gcyoung');
  const client = rawClient();
  let run = 0;
  const shard = 'model-00001-of-00002.safetensors';
  useTestBucket(client, bucket);

  it('orphan blobs (and their bytes), unfinished uploads and orphan stamp objects younger than minAgeMs: counted, in a dry run and a real one, and none once old enough', async () => {
    const prefix = `r${run++}/`;
    const store = (await openCacheStore(`s3://${bucket}/${prefix}`, { create: true })) as S3CacheStore;
    await store.addEntry(toInput(makeTensor([33], 1), 'kept'));
    const orphan = makeTensor([34], 2);
    const blob = blobObjectName(orphan.key, 'a'.repeat(64));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${blob}`, Body: orphan.payload }));
    await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${prefix}${blobObjectName(orphan.key, 'b'.repeat(64))}` }));
    // A stamp object of a binding that does not exist (no alias, no entry).
    const stamp = stampObjectName([shard, 0, 68], orphan.key, `etag:"${'c'.repeat(32)}"`, prefix);
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${stamp}`, Body: new Uint8Array(0) }));
    const expected = { orphanBlobs: 1, orphanBytes: orphan.payload.length, tempFiles: 1, orphanStamps: 1, orphanAliases: 0 };
    const dry = await store.gc({ dryRun: true, minAgeMs: HOUR_MS });
    expect(dry).toMatchObject({ orphanBlobs: [], tempFiles: [], orphanStamps: [], keptYoung: expected });
    const real = await store.gc({ minAgeMs: HOUR_MS });
    expect(real).toMatchObject({ orphanBlobs: [], tempFiles: [], orphanStamps: [], keptYoung: expected });
    const old = await gcBelowFloorForTests(store);
    expect(old).toMatchObject({ orphanBlobs: [blob], orphanStamps: [stamp], keptYoung: { orphanBlobs: 0, orphanBytes: 0, tempFiles: 0, orphanStamps: 0, orphanAliases: 0 } });
    expect(old.tempFiles).toHaveLength(1);
    await store.close();
  });

  it('a real run counts an orphan it listed as old but found written again when it looked before deleting', async () => {
    const prefix = `r${run++}/`;
    const store = (await openCacheStore(`s3://${bucket}/${prefix}`, { create: true })) as S3CacheStore;
    const orphan = makeTensor([34], 3);
    const blob = blobObjectName(orphan.key, 'd'.repeat(64));
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${blob}`, Body: orphan.payload }));
    // The listing shows the blob an hour old; the look before the DELETE sees its real, fresh Last-Modified.
    const transport = (store as unknown as { transport: { list: (dir: string) => Promise<ListedObject[]> } }).transport;
    const list = transport.list.bind(transport);
    transport.list = async (dir) => (await list(dir)).map((o) => (o.name === blob ? { ...o, lastModifiedMs: o.lastModifiedMs - HOUR_MS } : o));
    const report = await store.gc({ minAgeMs: 60_000, allowMinAgeBelowFloorForTests: true });
    expect(report).toMatchObject({ orphanBlobs: [], orphanBytes: 0, keptYoung: { orphanBlobs: 1, orphanBytes: orphan.payload.length } });
    await store.close();
  });
});
