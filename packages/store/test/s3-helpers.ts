import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { describe, it } from 'vitest';

// The SDK's "Node 20 support ends in 2027" notice would print once per test process.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export const endpoint = process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
/** Set by scripts/ceph/start-ceph.sh: the tests that stop the gateway need its PID file and restart script. */
export const cephDir = process.env.SPLITZIP_CEPH_DIR;

/** Whether the gateway answers HTTP at all (bounded: 3 s). */
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

/**
 * describe() for tests that need the gateway: without one they are skipped with a message locally,
 * and FAIL in CI (CI is set), where scripts/test.sh must have started it.
 */
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
  const config: S3ClientConfig = {
    endpoint,
    forcePathStyle: true,
    region: process.env.AWS_REGION ?? 'us-east-1',
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
  return new S3Client(config);
}

/** A bucket name no other run uses. */
export function uniqueBucket(tag: string): string {
  return `sz-${tag}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/** Deletes every object of a bucket and the bucket (best effort, bounded). */
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
    // The gateway is thrown away after the run anyway.
  }
}

export function gatewayPid(): number {
  return Number(readFileSync(join(cephDir!, 'pids', 'rgw.pid'), 'utf8').trim());
}

export function canControlGateway(): boolean {
  return cephDir !== undefined && existsSync(join(cephDir, 'rgw-start.sh')) && existsSync(join(cephDir, 'pids', 'rgw.pid'));
}
