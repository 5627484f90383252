// A cache copied with hard links (`cp -al`, snapshot tools that link unchanged files) shares its
// journal file with the original. Blobs and manifests part by themselves (only ever replaced by a
// rename); the journal was appended in place, so each cache's writer wrote into the other's journal,
// and each cache read entries whose blobs were in the other directory. A writer now replaces a
// journal that has another name with its own copy before it appends anything.
import { link, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { makeCache, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterAll(removeTempDirs);

/** `cp -al source target`: every file of the cache linked, not copied. */
async function linkCopy(source: string, target: string): Promise<void> {
  await mkdir(join(target, 'blobs'), { recursive: true });
  for (const name of await readdir(source)) {
    if (name === 'blobs') continue;
    await link(join(source, name), join(target, name));
  }
  for (const name of await readdir(join(source, 'blobs'))) await link(join(source, 'blobs', name), join(target, 'blobs', name));
}

async function journalOf(root: string): Promise<{ name: string; links: number; sizeBytes: number }> {
  const name = (await readdir(root)).find((n) => /^journal\.\d+$/.test(n))!;
  const info = await stat(join(root, name));
  return { name, links: info.nlink, sizeBytes: info.size };
}

describe('a hard-linked copy of a cache', () => {
  it("writes of either side stay its own: the other never sees its entries, both verify, and the copy's open readers follow its writes", async () => {
    const { root: original, tensors } = await makeCache(2);
    const copy = join(await makeTempDir(), 'copy');
    await linkCopy(original, copy);
    const before = await journalOf(original);
    expect(before.links).toBe(2);

    // A reader of the copy, opened while the journal is shared.
    const reader = await openCacheStore(copy);
    const added = makeTensor([32, 33], 91);
    const writer = await openCacheStore(copy);
    try {
      await writer.addEntry(toInput(added, 'copy.only', [['model.safetensors', 0, added.bytes.byteLength]]));
    } finally {
      await writer.close();
    }
    // The original's journal is as it was, and now its own; the copy has another.
    const after = await journalOf(original);
    expect(after).toEqual({ ...before, links: 1 });
    const fromOriginal = await openCacheStore(original);
    const fromCopy = await openCacheStore(copy);
    try {
      expect(fromOriginal.getEntry(added.key)).toBeUndefined();
      expect(fromOriginal.lookupBySlice('model.safetensors', 0, added.bytes.byteLength)).toBeUndefined();
      expect(fromCopy.getEntry(added.key)).toBeDefined();
      for (const tensor of tensors) {
        expect(fromOriginal.getEntry(tensor.key)).toBeDefined();
        expect(fromCopy.getEntry(tensor.key)).toBeDefined();
      }
      expect((await fromOriginal.verify()).ok).toBe(true);
      expect((await fromCopy.verify()).ok).toBe(true);
      // The reader that had the shared journal open sees the copy's write, not a stale view.
      await reader.refresh();
      expect(reader.getEntry(added.key)).toBeDefined();
    } finally {
      await fromOriginal.close();
      await fromCopy.close();
      await reader.close();
    }

    // The original's writes stay its own too.
    const second = makeTensor([16, 17], 92);
    const originalWriter = await openCacheStore(original);
    try {
      await originalWriter.addEntry(toInput(second, 'original.only'));
    } finally {
      await originalWriter.close();
    }
    const copyAgain = await openCacheStore(copy);
    try {
      expect(copyAgain.getEntry(second.key)).toBeUndefined();
      expect(copyAgain.getEntry(added.key)).toBeDefined();
      expect((await copyAgain.verify()).ok).toBe(true);
    } finally {
      await copyAgain.close();
    }
  });
});
