// A release-style deployment points a symlink at the current cache and swaps it atomically
// (`ln -sfn v2 current.tmp && mv -T current.tmp current`, or Kubernetes' `..data`). A handle opened
// through the link stays with the directory it opened: before, its refresh read the new cache's
// manifest while its blob reads used the old blobs directory (resolved at the first read), so every
// new entry failed BLOB_MISSING naming a file that exists.
import { cp, mkdir, realpath, rename, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

it('a handle opened through a symlink stays with the directory it opened when the link is swapped', async () => {
  const dir = await makeTempDir();
  const v1 = join(dir, 'v1');
  const v2 = join(dir, 'v2');
  const current = join(dir, 'current');
  const a = makeTensor([40, 3], 9101);
  const b = makeTensor([50, 7], 9102);
  const first = await openCacheStore(v1, { create: true });
  await first.addEntry(toInput(a, 'a', [['a.safetensors', 0, a.bytes.length]]));
  await first.close();
  // v2: v1 plus b (copied, as a release would ship it).
  await mkdir(v2);
  await cp(v1, v2, { recursive: true });
  const second = await openCacheStore(v2);
  await second.addEntry(toInput(b, 'b', [['b.safetensors', 0, b.bytes.length]]));
  await second.close();

  await symlink('v1', current);
  const store = await openCacheStore(current);
  try {
    expect(store.root).toBe(await realpath(v1));
    const slotA = new Uint8Array(store.getEntry(a.key)!.compBytes);
    expect(Buffer.from(await store.readBlob(a.key, slotA)).equals(Buffer.from(a.payload))).toBe(true);
    // The swap.
    await symlink('v2', join(dir, 'current.tmp'));
    await rename(join(dir, 'current.tmp'), current);
    await store.refresh();
    // Still v1's: no entry it cannot read, and its own entries read as before.
    expect(store.getEntry(b.key)).toBeUndefined();
    expect(store.lookupBySlice('b.safetensors', 0, b.bytes.length)).toBeUndefined();
    slotA.fill(0);
    expect(Buffer.from(store.readBlobSync!(a.key, slotA)).equals(Buffer.from(a.payload))).toBe(true);
    expect((await store.verify()).ok).toBe(true);
  } finally {
    await store.close();
  }
  // A reopen follows the link.
  const reopened = await openCacheStore(current);
  try {
    expect(reopened.root).toBe(await realpath(v2));
    const entry = reopened.getEntry(b.key)!;
    expect(Buffer.from(await reopened.readBlob(b.key, new Uint8Array(entry.compBytes))).equals(Buffer.from(b.payload))).toBe(true);
  } finally {
    await reopened.close();
  }
});
