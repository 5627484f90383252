// On an s3:// cache, verify's notes of what gc clears come from the S3 gc's dry run: orphan blob
// objects older than its default --min-age only (a younger one may be a running build's, between
// its blob's PUT and its entry's), no locks (S3 caches have none). inspect --json's dropRefusal is
// the S3 store's own answer to the drop's dry run. Through the real binary against the gateway.
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { openCacheStore, type GcReport, type S3GcOptions } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import type { InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
const client = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('leftovers');

beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => {
  if (client) {
    await dropBucket(client, bucket);
    client.destroy();
  }
  await temp?.cleanup();
});

describeS3('verify and inspect of an s3:// cache', () => {
  it('a young orphan blob is not noted (gc would keep it too); inspect --json says what the store says of the drop', async () => {
    const prefix = 'caches/leftovers';
    const url = `s3://${bucket}/${prefix}`;
    const model = join(temp.path, 'model');
    await writeShardedTestModel(model, [gaussianBf16('a.weight', [64, 64], 1501), gaussianBf16('b.weight', [32, 64], 1502)], 8192);
    const built = await runCli(['build', model, '--out', url, '--jobs', '0', '--quiet']);
    expect(built.code, built.stderr).toBe(0);
    // An orphan written just now: a running build's blob looks the same until its entry's PUT.
    const orphan = `blobs/${'e'.repeat(40)}.${'f'.repeat(64)}.bin`;
    await client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/${orphan}`, Body: Buffer.from('not a blob') }));

    const { json: verified } = await runJson<VerifyJson>(['verify', url]);
    expect(verified.ok).toBe(true);
    expect(verified.leftovers).toEqual({ orphanBlobs: [], orphanBytes: 0, staleLocks: [], tempFiles: [] });
    const text = await runCli(['verify', url]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).not.toContain('note:');

    // It is an orphan all the same: the store's gc with no minimum age (tests only) finds it.
    const store = await openCacheStore(url);
    let refusal: { code: string } | null;
    try {
      const young = await (store.gc as (options: S3GcOptions) => Promise<GcReport>).call(store, { dryRun: true, minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
      expect(young.orphanBlobs).toEqual([orphan]);
      refusal = await store.dropUnboundEntries({ dryRun: true }).then(
        () => null,
        (error: { code: string }) => ({ code: error.code }),
      );
    } finally {
      await store.close();
    }
    const { json: inspected } = await runJson<InspectJson>(['inspect', url]);
    expect(inspected.totals.dropRefusal === null ? null : { code: inspected.totals.dropRefusal!.code }).toEqual(refusal);
    // The drop needs no --exclusive on s3:// since 2026-12-07 (its intent objects): false, kept for scripts.
    expect(inspected.totals.dropNeedsExclusive).toBe(false);
  });
});
