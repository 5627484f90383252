// The S3 gateway for the s3:// tests: a real Ceph RADOS Gateway (scripts/ceph/start-ceph.sh, then
// `source $dir/env`), found through the AWS SDK's environment variables. Without one the tests are
// skipped with a message locally and FAIL when CI is set (scripts/test.sh must have started it).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
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

/** Why the gateway cannot be used (undefined when it answers); probed once per test process. */
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

/** A plain SDK client for the gateway (path-style; checksums only where required, as radosgw wants). */
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

/** A bucket name no other run uses: `${prefix}-${tag}-<time>-<random>`. */
export function uniqueBucketName(prefix: string, tag: string): string {
  return `${prefix}-${tag}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

export async function createBucket(client: S3Client, bucket: string): Promise<void> {
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
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

/** Every key below a prefix, in the gateway's listing order. */
export async function listKeys(client: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken }));
    for (const object of page.Contents ?? []) if (object.Key) keys.push(object.Key);
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  return keys;
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

/** Whether this run may stop and restart radosgw (start-ceph.sh left its PID file and restart script). */
export function canControlGateway(): boolean {
  return cephDir !== undefined && existsSync(join(cephDir, 'rgw-start.sh')) && existsSync(join(cephDir, 'pids', 'rgw.pid'));
}

export function gatewayPid(): number {
  return Number(readFileSync(join(cephDir!, 'pids', 'rgw.pid'), 'utf8').trim());
}

export function isGatewayRunning(): boolean {
  try {
    process.kill(gatewayPid(), 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGKILLs radosgw by its PID (synchronous: usable from a callback in the middle of a load). */
export function killGateway(): void {
  process.kill(gatewayPid(), 'SIGKILL');
}

export async function waitGatewayGone(): Promise<void> {
  for (let i = 0; i < 100 && isGatewayRunning(); i++) await sleep(50);
  if (isGatewayRunning()) throw new Error('radosgw did not exit');
}

export function restartGateway(): void {
  execFileSync('bash', [join(cephDir!, 'rgw-start.sh')], { stdio: 'ignore', timeout: 120_000 });
}
