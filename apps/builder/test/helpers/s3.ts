// The S3 gateway for the s3:// tests: a real Ceph RADOS Gateway (scripts/ceph/start-ceph.sh, then
// `source $dir/env`), found through the AWS SDK's environment variables. Without one the tests are
// skipped with a message locally and FAIL when CI is set (scripts/test.sh must have started it).
import { randomBytes } from 'node:crypto';
import { DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { describe, it } from 'vitest';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export const endpoint = process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;

async function probeGateway(): Promise<string | undefined> {
  if (!endpoint) return 'AWS_ENDPOINT_URL is not set (start a gateway: scripts/ceph/start-ceph.sh, then source its env file)';
  if (!process.env.AWS_ACCESS_KEY_ID || !process.env.AWS_SECRET_ACCESS_KEY) return 'AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set';
  try {
    const response = await fetch(endpoint, { signal: AbortSignal.timeout(3000) });
    await response.arrayBuffer();
    return undefined;
  } catch (error) {
    return `the S3 gateway at ${endpoint} does not answer: ${(error as Error).message}`;
  }
}

export const gatewayProblem = await probeGateway();

export function describeS3(title: string, body: () => void): void {
  if (!gatewayProblem) {
    describe(title, body);
  } else if (process.env.CI) {
    describe(title, () => {
      it('needs the S3 gateway (CI)', () => {
        throw new Error(`CI is set but ${gatewayProblem}`);
      });
    });
  } else {
    console.warn(`skipping "${title}": ${gatewayProblem}`);
    describe.skip(title, body);
  }
}

export function rawClient(): S3Client {
  return new S3Client({
    endpoint,
    forcePathStyle: true,
    region: process.env.AWS_REGION ?? 'us-east-1',
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** A bucket name no other run uses (the build creates it). */
export function uniqueBucket(tag: string): string {
  return `sz-bld-${tag}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

export interface ObjectInfo {
  key: string;
  sizeBytes: number;
  etag: string;
  lastModifiedMs: number;
}

/** Every object below a prefix, sorted by key. */
export async function listObjects(client: S3Client, bucket: string, prefix = ''): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) out.push({ key: o.Key!, sizeBytes: o.Size ?? 0, etag: o.ETag ?? '', lastModifiedMs: o.LastModified?.getTime() ?? 0 });
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

/** Deletes every object of a bucket and the bucket (best effort: the gateway is thrown away anyway). */
export async function dropBucket(client: S3Client, bucket: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  try {
    for (;;) {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length === 0 || Date.now() > deadline) break;
      await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
    }
    await client.send(new DeleteBucketCommand({ Bucket: bucket }));
  } catch {
    // best effort
  }
}
