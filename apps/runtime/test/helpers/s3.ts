// The S3 gateway helpers live in @splitzip/test-support/s3 (shared with the store and builder suites);
// the runtime adds its bucket-name prefix and uploading a local model directory.
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
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

/** magic (8) | identity digest (32) | content digest (32): the store's read-through range file header. */
const RANGE_HEADER_BYTES = 72;

/**
 * Damages this host's kept copy of `bytes` (a range file under `dir` whose body is exactly them) as a
 * GET body damaged in transit was kept: other bytes, with their own digest. `edit` changes the body;
 * returns the file's name.
 */
export async function damageCopy(dir: string, bytes: Uint8Array, edit: (body: Buffer) => void): Promise<string> {
  for (const name of (await readdir(dir)).filter((file) => file.startsWith('range.'))) {
    const file = await readFile(join(dir, name));
    if (file.length !== RANGE_HEADER_BYTES + bytes.length || !file.subarray(RANGE_HEADER_BYTES).equals(bytes)) continue;
    const body = file.subarray(RANGE_HEADER_BYTES);
    edit(body);
    createHash('sha256').update(body).digest().copy(file, RANGE_HEADER_BYTES - 32);
    await writeFile(join(dir, name), file);
    return name;
  }
  throw new Error(`no range file holds those ${bytes.length} bytes`);
}
