// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the builder and runtime suites);
// only the store's bucket-name prefix is chosen here.
import type { S3Client } from '@aws-sdk/client-s3';
import { createBucket, dropBucket, uniqueBucketName } from '@splitzip/test-support/s3';
import { afterAll, beforeAll } from 'vitest';

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
