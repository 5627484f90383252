// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the builder and runtime suites);
// only the store's bucket-name prefix is chosen here.
import { uniqueBucketName } from '@splitzip/test-support/s3';

export { canControlGateway, cephDir, describeS3, dropBucket, endpoint, gatewayPid, gatewayProblem, rawClient } from '@splitzip/test-support/s3';

/** A bucket name no other run uses. */
export function uniqueBucket(tag: string): string {
  return uniqueBucketName('sz', tag);
}
