// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the store and builder suites);
// the runtime adds its bucket-name prefix and uploading a local model directory.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { uniqueBucketName } from '@splitzip/test-support/s3';

export {
  canControlGateway,
  cephDir,
  createBucket,
  describeS3,
  dropBucket,
  endpoint,
  gatewayPid,
  gatewayProblem,
  isGatewayRunning,
  killGateway,
  listKeys,
  rawClient,
  restartGateway,
  waitGatewayGone,
} from '@splitzip/test-support/s3';

export function uniqueBucket(tag: string): string {
  return uniqueBucketName('sz-rt', tag);
}

/** Uploads every file of a local model directory (shards + index) below `prefix`. */
export async function uploadDirectory(client: S3Client, bucket: string, prefix: string, dir: string): Promise<string[]> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.safetensors') || name.endsWith('.json'));
  for (const name of names) {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: await readFile(join(dir, name)) }));
  }
  return names;
}

/** A GET body as a damaged transit gives it: one byte of its first chunk flipped, the rest as sent. */
export function damageFirstChunk(body: Readable): Readable {
  let first = true;
  return body.pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        if (first && chunk.length > 0) {
          chunk = Buffer.from(chunk);
          chunk[chunk.length >> 1]! ^= 0x5a;
          first = false;
        }
        done(null, chunk);
      },
    }),
  );
}
