// A SLICE_CONFLICT of a directory cache names the binding in the way as judged (review of 736a928):
// its key, the stamps recorded with it and this file's stamp in the error's context, and what those
// stamps say (this file's inode number: this file before it changed in place, or another file system's
// file of that number; an object's stamp; none). A binding of this inode number whose ctime is newer
// than this file's cannot be this file's past: another file's, bound beside, no conflict.
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { OBJECT_STAMP_PREFIX, openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildReport } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-slice-conflict-bindings-');
});
afterAll(async () => temp?.cleanup());

const SHAPE = [64, 64];
const SHARD = 'model.safetensors';

/** A file's stamp and its only tensor's slice. */
async function stampAndSlice(model: string): Promise<{ stamp: string; offsetBytes: number; sizeBytes: number }> {
  const opened = await openSafetensorsModel(model);
  try {
    return { stamp: opened.shards[0]!.stamp!, ...opened.tensors[0]!.slice };
  } finally {
    await opened.close();
  }
}

/** Rebinds the slice of `key` in `cacheDir` with `stamp` alone (its other stamps dropped). */
async function restamp(cacheDir: string, key: string, slice: { offsetBytes: number; sizeBytes: number }, stamp: string): Promise<void> {
  const store = await openCacheStore(cacheDir, { sliceBindingsPerFile: true });
  try {
    await store.unbindSlices([{ shardName: SHARD, ...slice, key }]);
    expect(await store.aliasSlices([{ key, shardName: SHARD, ...slice, stamp }])).toEqual([true]);
  } finally {
    await store.close();
  }
}

/** Two files of one shard name with other bytes, B built into the cache; B's entry key. */
async function setUp(name: string): Promise<{ a: string; cacheDir: string; bKey: string }> {
  const root = join(temp.path, name);
  await mkdir(join(root, 'A'), { recursive: true });
  await mkdir(join(root, 'B'), { recursive: true });
  const a = await writeSingleFileModel(join(root, 'A', SHARD), [gaussianBf16('w.weight', SHAPE, 1)]);
  const b = await writeSingleFileModel(join(root, 'B', SHARD), [gaussianBf16('w.weight', SHAPE, 2)]);
  const cacheDir = join(root, 'cache');
  const built = await run(['build', b, '--out', cacheDir, '--json']);
  return { a, cacheDir, bKey: (JSON.parse(built.out) as BuildReport).tensors[0]!.key! };
}

describe('SLICE_CONFLICT names the binding in the way', () => {
  it("this file's inode number with a newer ctime than this file's is another file's: bound beside, exit 0", async () => {
    const { a, cacheDir, bKey } = await setUp('newer-ctime');
    const { stamp, offsetBytes, sizeBytes } = await stampAndSlice(a);
    const [size, mtime, ctime, inode] = stamp.split(':') as [string, string, string, string];
    // Recorded for a file of A's inode number that changed after A last did (another file system's).
    await restamp(cacheDir, bKey, { offsetBytes, sizeBytes }, `${size}:${mtime}:${BigInt(ctime) + 10n ** 12n}:${inode}`);
    const built = await run(['build', a, '--out', cacheDir, '--json']);
    expect(built.code, built.out).toBe(0);
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.lookupSliceBindings(SHARD, offsetBytes, sizeBytes)).toHaveLength(2);
    } finally {
      await store.close();
    }
  });

  it("this file before it changed in place: the key, its stamps and this file's stamp in the context; the other file system named", async () => {
    const { a, cacheDir } = await setUp('in-place');
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const before = await stampAndSlice(a);
    const inode = (await stat(a)).ino;
    const next = await writeSingleFileModel(join(cacheDir, '..', 'next.safetensors'), [gaussianBf16('w.weight', SHAPE, 3)]);
    await writeFile(a, await readFile(next));
    expect((await stat(a)).ino).toBe(inode);
    const now = await stampAndSlice(a);
    const refused = await run(['build', a, '--out', cacheDir, '--json']);
    expect(refused.code).toBe(1);
    const error = (JSON.parse(refused.out) as { error: Record<string, unknown> & { message: string } }).error;
    expect(error).toMatchObject({ code: 'SLICE_CONFLICT', boundStamps: [before.stamp], stamp: now.stamp, boundBinding: 'same-inode' });
    expect(error.boundKey).toMatch(/^[0-9a-f]{40}$/);
    expect(error.message).toContain(`another entry (${error.boundKey as string}), of other bytes, recorded with a file stamp of this file's inode number (${inode})`);
    expect(error.message).toContain('or another file with the same inode number on another file system');
  });

  it("an object-stamped binding is an s3:// object's, not this file's: this file's binding goes beside it, exit 0, manifest format 4 (FILE-BINDINGS.md phase 3)", async () => {
    const { a, cacheDir, bKey } = await setUp('object');
    const { stamp, offsetBytes, sizeBytes } = await stampAndSlice(a);
    await restamp(cacheDir, bKey, { offsetBytes, sizeBytes }, `${OBJECT_STAMP_PREFIX}"0123456789abcdef"`);
    // Before: SLICE_CONFLICT naming it ("recorded with an object's stamp").
    const built = await run(['build', a, '--out', cacheDir, '--json']);
    expect(built.code, built.err).toBe(0);
    expect((JSON.parse(built.out) as BuildReport).cache_object_format_moved).toBe(true);
    const store = await openCacheStore(cacheDir);
    try {
      const bindings = store.lookupSliceBindings(SHARD, offsetBytes, sizeBytes);
      expect(bindings.map((binding) => binding.entry.key)).toHaveLength(2);
      expect(store.lookupSliceBinding(SHARD, offsetBytes, sizeBytes, stamp)?.entry.key).not.toBe(bKey);
      expect(store.lookupSliceBinding(SHARD, offsetBytes, sizeBytes, `${OBJECT_STAMP_PREFIX}"0123456789abcdef"`)?.entry.key).toBe(bKey);
    } finally {
      await store.close();
    }
    expect(JSON.parse(await readFile(join(cacheDir, 'manifest.json'), 'utf8')).format).toBe(4);
  });
});
