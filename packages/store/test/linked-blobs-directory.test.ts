// A cache whose blobs/ is not its own directory (fuzz probe, 2026-12-07): `cp -a A B; rm -r B/blobs;
// ln -s A/blobs B/blobs`, then `gc B` removed A's newer blobs as B's orphans, and `verify A` failed
// BLOB_MISSING. Reads go through such a link (blobs on another disk); nothing is deleted through it.
import { spawnSync } from 'node:child_process';
import { cp, readdir, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { pidSpaceTag } from '../src/write-lock.js';
import { catchError, makeCache, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

/** Cache A with a newer entry than B, B a copy of A from before it whose blobs/ links A's. */
async function makeLinkedCopy(): Promise<{ a: string; b: string; newer: ReturnType<typeof makeTensor>; older: ReturnType<typeof makeTensor>[] }> {
  const { root: a, tensors: older } = await makeCache(2);
  const b = join(await makeTempDir(), 'b');
  await cp(a, b, { recursive: true });
  const newer = makeTensor([20, 6], 7311);
  const store = await openCacheStore(a);
  await store.addEntry(toInput(newer, 'newer', [['newer-shard', 0, newer.bytes.length]]));
  await store.close();
  await rm(join(b, 'blobs'), { recursive: true });
  await symlink(join(a, 'blobs'), join(b, 'blobs'));
  return { a, b, newer, older };
}

it("gc and dropUnboundEntries of a cache whose blobs/ links another cache's refuse, naming the link; that cache's blobs stay; reads go through it", async () => {
  const { a, b, newer, older } = await makeLinkedCopy();
  const store = await openCacheStore(b);
  try {
    for (const dryRun of [true, false]) {
      const error = await catchError(() => store.gc({ dryRun }));
      expect(error.code).toBe('UNSAFE_BLOB_PATH');
      expect(error.path).toBe(join(b, 'blobs'));
      expect(error.details).toMatchObject({ reason: 'blobs-directory-link', target: join(a, 'blobs') });
      expect(error.message).toMatch(/gc.*refuses: .*blobs is a symbolic link .*another cache's blobs.*Link the whole cache directory instead/);
    }
    const drop = await catchError(() => store.dropUnboundEntries());
    expect(drop.code).toBe('UNSAFE_BLOB_PATH');
    expect(drop.details).toMatchObject({ reason: 'blobs-directory-link', operation: 'dropUnboundEntries' });
    // Reads through the link: B's own entries, checked as ever.
    for (const tensor of older) {
      const slot = new Uint8Array(store.getEntry(tensor.key)!.compBytes);
      expect(Buffer.from(await store.readBlob(tensor.key, slot)).equals(Buffer.from(tensor.payload))).toBe(true);
    }
    expect((await store.verify({ decode: true })).ok).toBe(true);
  } finally {
    await store.close();
  }
  expect(await readdir(join(a, 'blobs'))).toContain(`${newer.key}.bin`);
  const owner = await openCacheStore(a);
  try {
    expect((await owner.verify()).ok).toBe(true);
    // The owner's own gc still runs (its blobs/ is a directory).
    expect((await owner.gc()).orphanBlobs).toEqual([]);
  } finally {
    await owner.close();
  }
});

it("removeAbandonedTempFiles leaves a linked blobs/'s temp files (maybe another cache's writer's) and sweeps the root's", async () => {
  const { a, b } = await makeLinkedCopy();
  const dead = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
  const blobTemp = `.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.bin`;
  const rootTemp = `.tmp-${dead}-0123456789abcdef.${pidSpaceTag()}.manifest`;
  await writeFile(join(a, 'blobs', blobTemp), Buffer.alloc(100));
  await writeFile(join(b, rootTemp), '{}');
  const old = new Date(Date.now() - 7 * 24 * 3600 * 1000);
  await utimes(join(a, 'blobs', blobTemp), old, old);
  const store = await openCacheStore(b);
  try {
    const report = await store.removeAbandonedTempFiles!();
    expect(report.tempFiles).toEqual([rootTemp]);
  } finally {
    await store.close();
  }
  expect(await readdir(join(a, 'blobs'))).toContain(blobTemp);
});

it('a blobs that is a file: gc refuses (not-a-directory), nothing removed', async () => {
  const { root } = await makeCache(1);
  await rm(join(root, 'blobs'), { recursive: true });
  await writeFile(join(root, 'blobs'), 'not a directory');
  await writeFile(join(root, 'journal.1'), ''); // an old journal gc would remove
  const store = await openCacheStore(root);
  try {
    const error = await catchError(() => store.gc());
    expect(error.code).toBe('UNSAFE_BLOB_PATH');
    expect(error.details).toMatchObject({ reason: 'blobs-directory-not-a-directory', operation: 'gc' });
  } finally {
    await store.close();
  }
  expect(await readdir(root)).toContain('journal.1');
});
