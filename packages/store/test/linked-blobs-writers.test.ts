// No writer goes through a blobs/ that is not the cache's own directory (review of 4e5679d,
// 2026-12-07): blob files are named <contentKey>.bin whatever their encoding, and publishing renames
// over the name. Cache B, whose blobs/ linked A's, building a tensor A holds at another chunk size
// replaced A's blob with its own encoding (verify A failed; A's rebuild put it back, and then B's
// verify failed BLOB_SIZE_MISMATCH). Reads through the link still work.
import { mkdir, readFile, readdir, rename, rm, symlink, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore, recoverDamagedManifest } from '../src/index.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput, type TestTensor } from './helpers.js';

afterEach(removeTempDirs);

/** A holds `shared` at chunk size 64 (B would add it at 512); B holds `own` (chunk 128) and its blobs/ links A's, B's blob moved there. */
async function makeTwoCaches(): Promise<{ a: string; b: string; shared: TestTensor; own: TestTensor }> {
  const top = await makeTempDir();
  const a = join(top, 'a');
  const b = join(top, 'b');
  const shared = makeTensor([40, 30], 5101, 64);
  const own = makeTensor([30, 4], 5102, 128);
  for (const [root, tensor, name] of [[a, shared, 'shared'], [b, own, 'own']] as const) {
    const store = await openCacheStore(root, { create: true });
    await store.addEntry(toInput(tensor, name, [[`${name}-shard`, 0, tensor.bytes.length]]));
    await store.close();
  }
  // As the review did: B's blobs moved into A's directory, B's blobs/ a link to it.
  for (const name of await readdir(join(b, 'blobs'))) await rename(join(b, 'blobs', name), join(a, 'blobs', name));
  await rm(join(b, 'blobs'), { recursive: true });
  await symlink(join(a, 'blobs'), join(b, 'blobs'));
  return { a, b, shared, own };
}

function expectLinkRefusal(error: Awaited<ReturnType<typeof catchError>>, a: string, b: string, operation: string): void {
  expect(error.code).toBe('UNSAFE_BLOB_PATH');
  expect(error.path).toBe(join(b, 'blobs'));
  expect(error.details).toMatchObject({ reason: 'blobs-directory-link', target: join(a, 'blobs'), operation });
  expect(error.message).toMatch(/refuses: .*blobs is a symbolic link .*another cache's blobs.*Link the whole cache directory instead/);
}

it("adding a tensor A holds, at another chunk size, through B's linked blobs/ refuses; A's blob stays its own encoding", async () => {
  const { a, b, shared } = await makeTwoCaches();
  const blobOfA = join(a, 'blobs', `${shared.key}.bin`);
  const before = await readFile(blobOfA);
  const other = makeTensor([40, 30], 5101, 512);
  expect(other.key).toBe(shared.key);
  expect(Buffer.from(other.payload).equals(Buffer.from(shared.payload))).toBe(false);
  const store = await openCacheStore(b);
  try {
    expectLinkRefusal(await catchError(() => store.addEntry(toInput(other, 'shared', [['b-shard', 0, other.bytes.length]]))), a, b, 'addEntries');
    expect(store.getEntry(shared.key)).toBeUndefined();
  } finally {
    await store.close();
  }
  expect((await readFile(blobOfA)).equals(before)).toBe(true);
  // Nothing staged there either.
  expect((await readdir(join(a, 'blobs'))).filter((name) => name.startsWith('.tmp-'))).toEqual([]);
  const owner = await openCacheStore(a);
  try {
    expect((await owner.verify({ decode: true })).ok).toBe(true);
  } finally {
    await owner.close();
  }
});

it("repairBlob, aliasSlices, compact and recoverDamagedManifest of B refuse through the link; reads and verify go through it", async () => {
  const { a, b, own } = await makeTwoCaches();
  const store = await openCacheStore(b);
  try {
    // Reads: B's entry, its blob in A's directory.
    const slot = new Uint8Array(store.getEntry(own.key)!.compBytes);
    expect(Buffer.from(await store.readBlob(own.key, slot)).equals(Buffer.from(own.payload))).toBe(true);
    expect((await store.verify({ decode: true })).ok).toBe(true);
    expectLinkRefusal(await catchError(() => store.aliasSlice(own.key, 'other-shard', 0, own.bytes.length)), a, b, 'a commit (addEntries, aliasSlices)');
    expectLinkRefusal(await catchError(() => store.compact()), a, b, 'compact');
    // A damaged blob: its repair would write through the link.
    await truncate(join(a, 'blobs', `${own.key}.bin`), 10);
    expectLinkRefusal(await catchError(() => store.repairBlob(own.key, own.payload)), a, b, 'repairBlob');
    expect((await readFile(join(a, 'blobs', `${own.key}.bin`))).length).toBe(10);
  } finally {
    await store.close();
  }
  await truncate(join(b, 'manifest.json'), 20);
  expectLinkRefusal(await catchError(() => recoverDamagedManifest(b)), a, b, 'recoverDamagedManifest');
});

it('a cache root that is a link (the remedy) builds and gcs as ever', async () => {
  const top = await makeTempDir();
  const real = join(top, 'disk2', 'cache');
  await mkdir(join(top, 'disk2'));
  const tensor = makeTensor([40, 3], 5103, 64);
  const first = await openCacheStore(real, { create: true });
  await first.addEntry(toInput(tensor, 't', [['t-shard', 0, tensor.bytes.length]]));
  await first.close();
  await symlink(real, join(top, 'cache'));
  const store = await openCacheStore(join(top, 'cache'));
  try {
    const more = makeTensor([20, 6], 5104, 128);
    expect((await store.addEntry(toInput(more, 'more', [['more-shard', 0, more.bytes.length]]))).added).toBe(true);
    expect((await store.gc()).orphanBlobs).toEqual([]);
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await store.close();
  }
});
