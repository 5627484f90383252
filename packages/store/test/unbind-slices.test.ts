// unbindSlices on a directory cache: the bindings named go, by a compaction that writes the new
// manifest without them (no new journal record kind); entries, blobs and every other binding stay.
// A damaged or missing journal makes it refuse (JOURNAL_INVALID) also where nothing is bound in
// the part it read: its unapplied records may bind the slices.
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { JOURNAL_HEADER_BYTES } from '../src/journal-format.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const FILE_STAMP = '480:1733400000123456789:1733400000123456789:42';

/** A cache with three entries: `a` bound at two slices (one with a stamp), `b` at one, `c` at none. */
async function makeBoundCache() {
  const root = await makeTempDir();
  const a = makeTensor([40, 6], 11);
  const b = makeTensor([40, 6], 12);
  const c = makeTensor([40, 6], 13);
  const store = await openCacheStore(root, { create: true });
  await store.addEntries([
    toInput(a, 'a.weight', [['model-00001-of-00002.safetensors', 100, 480, [FILE_STAMP]], ['model-00001-of-00004.safetensors', 200, 480]]),
    toInput(b, 'b.weight', [['model-00001-of-00002.safetensors', 580, 480]]),
    toInput(c, 'c.weight'),
  ]);
  await store.close();
  return { root, a, b, c };
}

/** Every binding of a store as `shard@offset+size=key` (sorted). */
function bindingsOf(store: { entries(): Iterable<{ key: string; sliceKeys: readonly (readonly [string, number, number, ...unknown[]])[] }> }): string[] {
  const out: string[] = [];
  for (const entry of store.entries()) for (const [shard, offset, size] of entry.sliceKeys) out.push(`${shard}@${offset}+${size}=${entry.key}`);
  return out.sort();
}

describe('unbindSlices (directory cache)', () => {
  it('removes the bindings named and nothing else: entries, blobs, other bindings and their stamps stay; a new generation holds it, the journal only its header', async () => {
    const { root, a, b, c } = await makeBoundCache();
    const reader = await openCacheStore(root); // opened before: follows the new generation at its refresh
    const store = await openCacheStore(root);
    const generation = store.generation;
    const removed = await store.unbindSlices([
      { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480 },
      { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480 }, // a repeat counts once
      { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 580, sizeBytes: 480, key: b.key },
      { shardName: 'model-00001-of-00002.safetensors', offsetBytes: 999, sizeBytes: 480 }, // bound to nothing
    ]);
    expect(removed).toBe(2);
    expect(store.generation).toBe(generation + 1);
    expect(store.lookupBySlice('model-00001-of-00002.safetensors', 100, 480)).toBeUndefined();
    expect(store.lookupBySlice('model-00001-of-00002.safetensors', 580, 480)).toBeUndefined();
    // The other binding of `a` stays; every entry is still found by its content key.
    expect(store.lookupBySlice('model-00001-of-00004.safetensors', 200, 480)?.key).toBe(a.key);
    for (const t of [a, b, c]) expect(store.lookup(t.bytes, t.shape, 'BF16')?.key).toBe(t.key);
    expect(store.size).toBe(3);
    await store.close();

    // What is on disk: the new manifest without those bindings, its journal a bare header, every blob.
    const manifest = JSON.parse(await readFile(join(root, 'manifest.json'), 'utf8')) as { generation: number; entries: Record<string, { slice_keys: unknown[] }> };
    expect(manifest.generation).toBe(generation + 1);
    expect(manifest.entries[a.key]!.slice_keys).toEqual([['model-00001-of-00004.safetensors', 200, 480]]);
    expect(manifest.entries[b.key]!.slice_keys).toEqual([]);
    expect((await stat(join(root, `journal.${generation + 1}`))).size).toBe(JOURNAL_HEADER_BYTES);
    expect(await readdir(root)).not.toContain(`journal.${generation}`);
    expect((await readdir(join(root, 'blobs'))).sort()).toEqual([a, b, c].map((t) => `${t.key}.bin`).sort());

    await reader.refresh();
    expect(bindingsOf(reader)).toEqual([`model-00001-of-00004.safetensors@200+480=${a.key}`]);
    expect((await reader.verify({ decode: true })).ok).toBe(true);
    // No blob is an orphan: entries keep them.
    const gc = await reader.gc({ dryRun: true });
    expect(gc.orphanBlobs).toEqual([]);
    await reader.close();
  });

  it('keeps a binding whose stamps it does not touch: the stamps of the bindings that stay are as they were', async () => {
    const { root, a, b } = await makeBoundCache();
    const store = await openCacheStore(root);
    expect(await store.unbindSlices([{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 580, sizeBytes: 480 }])).toBe(1);
    expect(store.lookupSliceBinding('model-00001-of-00002.safetensors', 100, 480)).toEqual({ entry: store.getEntry(a.key), stamps: [FILE_STAMP] });
    expect(store.getEntry(b.key)?.sliceKeys).toEqual([]);
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.lookupSliceBinding('model-00001-of-00002.safetensors', 100, 480)?.stamps).toEqual([FILE_STAMP]);
    await reopened.close();
  });

  it('with a key, leaves a slice bound to another entry (rebound since the caller looked)', async () => {
    const { root, a, c } = await makeBoundCache();
    const other = await openCacheStore(root);
    const store = await openCacheStore(root);
    // Another handle rebinds the slice to `c` after `store` saw it bound to `a`.
    expect(store.lookupBySlice('model-00001-of-00004.safetensors', 200, 480)?.key).toBe(a.key);
    await other.aliasSlices([{ key: c.key, shardName: 'model-00001-of-00004.safetensors', offsetBytes: 200, sizeBytes: 480 }], { rebind: true });
    await other.close();
    await store.refresh();
    const generation = store.generation;
    expect(await store.unbindSlices([{ shardName: 'model-00001-of-00004.safetensors', offsetBytes: 200, sizeBytes: 480, key: a.key }])).toBe(0);
    expect(store.lookupBySlice('model-00001-of-00004.safetensors', 200, 480)?.key).toBe(c.key);
    expect(store.generation).toBe(generation);
    await store.close();
  });

  it('nothing bound: resolves 0 and writes nothing (no lock, no new generation)', async () => {
    const { root } = await makeBoundCache();
    const before = await readFile(join(root, 'manifest.json'));
    const store = await openCacheStore(root);
    expect(await store.unbindSlices([])).toBe(0);
    expect(await store.unbindSlices([{ shardName: 'elsewhere.safetensors', offsetBytes: 0, sizeBytes: 480 }])).toBe(0);
    await store.close();
    expect((await readFile(join(root, 'manifest.json'))).equals(before)).toBe(true);
  });

  it('keeps what other writers journalled since this handle looked, and a later alias binds the slice again', async () => {
    const { root, a, c } = await makeBoundCache();
    const store = await openCacheStore(root);
    const other = await openCacheStore(root, { compactOnClose: false });
    await other.aliasSlices([{ key: c.key, shardName: 'model-00002-of-00002.safetensors', offsetBytes: 0, sizeBytes: 480 }]);
    await other.close();
    expect(await store.unbindSlices([{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480 }])).toBe(1);
    expect(store.lookupBySlice('model-00002-of-00002.safetensors', 0, 480)?.key).toBe(c.key);
    expect(await store.aliasSlice(a.key, 'model-00001-of-00002.safetensors', 100, 480)).toBe(true);
    await store.close();
    const reopened = await openCacheStore(root);
    expect(reopened.lookupBySlice('model-00002-of-00002.safetensors', 0, 480)?.key).toBe(c.key);
    expect(reopened.lookupBySlice('model-00001-of-00002.safetensors', 100, 480)?.key).toBe(a.key);
    // Bound again without a stamp: the removed binding's stamps did not come back with it.
    expect(reopened.lookupSliceBinding('model-00001-of-00002.safetensors', 100, 480)?.stamps).toEqual([]);
    await reopened.close();
  });

  it('a damaged journal: refuses (JOURNAL_INVALID) where the part read binds nothing named, as where it does; writes nothing', async () => {
    const { root, a, c } = await makeBoundCache();
    const writer = await openCacheStore(root, { compactOnClose: false });
    const generation = writer.generation;
    // Record 1 binds `c` to a new slice; record 2, intact, follows the damage made below.
    expect(await writer.aliasSlice(c.key, 'model-00002-of-00002.safetensors', 0, 480)).toBe(true);
    await writer.addEntry(toInput(makeTensor([12, 8], 14), 'd.weight'));
    await writer.close();
    const path = join(root, `journal.${generation}`);
    const intact = await readFile(path);
    const damaged = Buffer.from(intact);
    damaged[JOURNAL_HEADER_BYTES + 12 + 40]! ^= 0x01; // one bit in record 1's body
    await writeFile(path, damaged);
    const before = await readFile(join(root, 'manifest.json'));

    const store = await openCacheStore(root, { compactOnClose: false });
    expect(store.lookupBySlice('model-00002-of-00002.safetensors', 0, 480)).toBeUndefined(); // as the part read has it
    // Bound only in the unapplied record: 0 told the caller (gc --model's prune) it was unbound.
    const unread = await catchError(() => store.unbindSlices([{ shardName: 'model-00002-of-00002.safetensors', offsetBytes: 0, sizeBytes: 480, key: c.key }]));
    expect(unread).toMatchObject({ code: 'JOURNAL_INVALID', details: { offsetBytes: JOURNAL_HEADER_BYTES } });
    // Bound in the part read: the writer session refused it already.
    const read = await catchError(() => store.unbindSlices([{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480 }]));
    expect(read.message).toBe(unread.message);
    expect(await store.unbindSlices([])).toBe(0); // asks nothing
    expect(store.generation).toBe(generation);
    await store.close();
    expect((await readFile(join(root, 'manifest.json'))).equals(before)).toBe(true);
    expect(Buffer.from(await readFile(path)).equals(damaged)).toBe(true);
    // With the bit put back, the slice is bound to `c`: the refusal kept the caller from a wrong 0.
    await writeFile(path, intact);
    const repaired = await openCacheStore(root);
    expect(repaired.lookupBySlice('model-00002-of-00002.safetensors', 0, 480)?.key).toBe(c.key);
    expect(repaired.lookupBySlice('model-00001-of-00002.safetensors', 100, 480)?.key).toBe(a.key);
    await repaired.close();
  });

  it('a missing journal: refuses (JOURNAL_INVALID, missing) where the manifest binds nothing named, writes nothing', async () => {
    const { root } = await makeBoundCache();
    const setup = await openCacheStore(root, { compactOnClose: false });
    const generation = setup.generation;
    await setup.close();
    await rm(join(root, `journal.${generation}`)); // its records, acknowledged commits, lost
    const before = await readFile(join(root, 'manifest.json'));
    const store = await openCacheStore(root, { compactOnClose: false });
    const error = await catchError(() => store.unbindSlices([{ shardName: 'elsewhere.safetensors', offsetBytes: 0, sizeBytes: 480 }]));
    expect(error).toMatchObject({ code: 'JOURNAL_INVALID', details: { missing: true } });
    expect(store.generation).toBe(generation);
    await store.close();
    expect((await readFile(join(root, 'manifest.json'))).equals(before)).toBe(true);
    expect(await readdir(root)).not.toContain(`journal.${generation}`);
  });

  it('refuses bad input with INVALID_ARGUMENT before changing anything', async () => {
    const { root } = await makeBoundCache();
    const before = await readFile(join(root, 'manifest.json'));
    const store = await openCacheStore(root);
    const cases: unknown[] = [
      'model-00001-of-00002.safetensors',
      [null],
      new Array(1),
      [{ shardName: '', offsetBytes: 100, sizeBytes: 480 }],
      [{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: -1, sizeBytes: 480 }],
      [{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 1.5 }],
      [{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480, key: 'A'.repeat(40) }],
      // A good item before a bad one: nothing of the call is done.
      [{ shardName: 'model-00001-of-00002.safetensors', offsetBytes: 100, sizeBytes: 480 }, { shardName: 'x', offsetBytes: '0', sizeBytes: 480 }],
    ];
    for (const items of cases) {
      const error = await catchError(() => store.unbindSlices(items as never));
      expect(error.code, JSON.stringify(items)).toBe('INVALID_ARGUMENT');
    }
    await store.close();
    expect((await readFile(join(root, 'manifest.json'))).equals(before)).toBe(true);
    const closed = await catchError(() => store.unbindSlices([]));
    expect(closed.code).toBe('STORE_CLOSED');
  });
});
