// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the store and runtime suites);
// only the builder's bucket-name prefix is chosen here.
import { uniqueBucketName } from '@splitzip/test-support/s3';

export { describeS3, dropBucket, endpoint, gatewayProblem, listObjects, rawClient, type ObjectInfo } from '@splitzip/test-support/s3';

/** A bucket name no other run uses (the build creates it). */
export function uniqueBucket(tag: string): string {
  return uniqueBucketName('sz-bld', tag);
}
