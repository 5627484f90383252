// Node's hash.update refuses one input of 2^31 bytes or more: a BF16 tensor of 2-4 GiB (a large
// model's embedding) must still get its content key, and a blob of that size its SHA-256.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { computeContentKey, digestHex } from '../src/index.js';
import { md5Base64 } from '../src/s3-transport.js';

const BYTES = 2 ** 31 + 2; // 2^30 + 1 BF16 values: the first size one update refused

/** The same digest fed from one shared 256 MiB zero buffer: needs no 2 GiB of its own. */
function zerosDigest(algorithm: 'sha1' | 'sha256' | 'md5', prefix: string, byteLength: number): string {
  const hash = createHash(algorithm).update(prefix, 'utf8');
  const zeros = new Uint8Array(2 ** 28);
  for (let done = 0; done < byteLength; done += zeros.length) hash.update(zeros.subarray(0, Math.min(zeros.length, byteLength - done)));
  return hash.digest('hex');
}

describe('hashing inputs of 2 GiB and more', () => {
  it('computeContentKey and digestHex of 2^31 + 2 bytes (zeros: calloc pages, little memory touched)', () => {
    const bytes = new Uint8Array(BYTES);
    expect(computeContentKey(bytes, [2 ** 30 + 1], 'BF16')).toBe(zerosDigest('sha1', `(${2 ** 30 + 1},)torch.bfloat16${BYTES}`, BYTES));
    expect(digestHex('sha256', bytes)).toBe(zerosDigest('sha256', '', BYTES));
    // An S3 PUT's Content-MD5 (a blob of 2 GiB+ under a high multipart threshold, or a part that large).
    expect(md5Base64(bytes)).toBe(Buffer.from(zerosDigest('md5', '', BYTES), 'hex').toString('base64'));
    expect(digestHex('sha256', new Uint8Array(0))).toBe(createHash('sha256').digest('hex'));
  }, 120_000);
});
