// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the builder and runtime suites);
// only the store's bucket-name prefix is chosen here.
import type { S3Client } from '@aws-sdk/client-s3';
import { createBucket, dropBucket, uniqueBucketName } from '@splitzip/test-support/s3';
import { afterAll, beforeAll } from 'vitest';
import type { CacheStore } from '../src/cache-store.js';
import type { S3CacheStore } from '../src/s3-cache-store.js';
import type { DropUnboundEntriesReport, GcOptions, GcReport } from '../src/types.js';

export { canControlGateway, cephDir, describeS3, dropBucket, endpoint, gatewayPid, gatewayProblem, rawClient } from '@splitzip/test-support/s3';

/** A bucket name no other run uses. */
export function uniqueBucket(tag: string): string {
  return uniqueBucketName('sz', tag);
}

/** The bucket of one test file, made before its tests and dropped (with `client`) after them. */
export function useTestBucket(client: S3Client, bucket: string): void {
  beforeAll(async () => {
    await createBucket(client, bucket);
  });
  afterAll(async () => {
    await dropBucket(client, bucket);
    client.destroy();
  });
}

/**
 * gc of an S3 store with a `minAgeMs` below MIN_S3_GC_AGE_MS (default 0), through the store's
 * test-only option: for tests that make orphans and collect them at once, with no writer at work.
 */
export function gcBelowFloorForTests(store: CacheStore, options: GcOptions = {}): Promise<GcReport> {
  return (store as S3CacheStore).gc({ minAgeMs: 0, ...options, allowMinAgeBelowFloorForTests: true });
}

/**
 * dropUnboundEntries of an S3 store with `minAgeMs` 0, through the store's test-only option: the
 * test's writers are the only ones (as the CLI runs it now: without `exclusive`).
 */
export function dropBelowFloorForTests(store: CacheStore): Promise<DropUnboundEntriesReport> {
  return (store as S3CacheStore).dropUnboundEntries({ minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
}

/**
 * Credentials for tests against a local stand-in server (no gateway): the SDK refuses to sign
 * without any (CredentialsProviderError) on a machine with none in its environment.
 */
export function ensureTestCredentials(): void {
  process.env.AWS_ACCESS_KEY_ID ??= 'test';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'test';
}
