// addEntry with a caller's payloadDigest (the builder's workers hash the payload they encoded): the
// right digest is recorded as is; a digest naming other bytes is refused; a wrong SHA-256 for the
// right payload (which the store cannot tell without hashing) is caught by verify.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readPayloadMeta } from '@splitzip/codec';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, type PayloadDigest } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

function digestOf(payload: Uint8Array): PayloadDigest {
  const meta = readPayloadMeta(payload);
  return { sha256: createHash('sha256').update(payload.subarray(0, meta.compBytes)).digest('hex'), checksum: meta.checksum, compBytes: meta.compBytes };
}

/** The payload followed by junk, as a pooled buffer holds it (bytes past compBytes are not the blob). */
function inLargerBuffer(tensor: TestTensor): Uint8Array {
  const buffer = new Uint8Array(tensor.payload.length + 100).fill(0xa5);
  buffer.set(tensor.payload);
  return buffer;
}

describe('addEntry with a payloadDigest', () => {
  it('records the given digest, equal to the one the store computes, and verify passes', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64, 48], 1);
    const b = makeTensor([33, 7], 2);
    const payload = inLargerBuffer(a);
    await store.addEntry({ ...toInput(a, 'a'), payload, payloadDigest: digestOf(payload) });
    await store.addEntry(toInput(b, 'b'));
    expect(store.getEntry(a.key)!.blobSha256).toBe(digestOf(a.payload).sha256);
    expect(store.getEntry(a.key)!.blobSha256).toBe(createHash('sha256').update(await readFile(join(root, 'blobs', `${a.key}.bin`))).digest('hex'));
    expect(store.getEntry(b.key)!.blobSha256).toBe(digestOf(b.payload).sha256);
    expect((await store.verify()).ok).toBe(true);
    await store.close();
  });

  it('refuses a digest of other bytes (another payload, a shifted range, a wrong length) and writes nothing', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64, 48], 3);
    const other = makeTensor([64, 48], 4);
    const right = digestOf(a.payload);
    const shifted = digestOf(other.payload); // what hashing the wrong slab range would report
    const cases: PayloadDigest[] = [
      shifted,
      { ...right, checksum: shifted.checksum },
      { ...right, compBytes: right.compBytes - 1 },
      { ...right, sha256: right.sha256.toUpperCase() },
      { ...right, sha256: right.sha256.slice(1) },
    ];
    for (const payloadDigest of cases) {
      const error = await catchError(() => store.addEntry({ ...toInput(a, 'a'), payloadDigest }));
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toMatch(/payloadDigest/);
    }
    expect(store.size).toBe(0);
    await store.close();
  });

  it('a wrong SHA-256 that names the right payload is recorded as given, and verify reports the blob', async () => {
    const root = await makeTempDir();
    const store = await openCacheStore(root, { create: true });
    const a = makeTensor([64, 48], 5);
    const right = digestOf(a.payload);
    const wrong = { ...right, sha256: createHash('sha256').update('not the blob').digest('hex') };
    await store.addEntry({ ...toInput(a, 'a'), payloadDigest: wrong });
    const report = await store.verify();
    expect(report.ok).toBe(false);
    expect(report.problems.map((p) => [p.key, p.code])).toEqual([[a.key, 'BLOB_CORRUPT']]);
    await store.close();
  });
});
