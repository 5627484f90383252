// aliasSlices items with `moveFrom` on a directory cache: a slice is moved from that entry (the
// journal's existing 'rebind' op, no manifest rewrite), bound when unbound, and left alone (false)
// when bound to any other entry, also one another writer bound after the caller looked.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openCacheStore, type CacheStore } from '../src/index.js';
import { JOURNAL_HEADER_BYTES, scanJournalRecords } from '../src/journal-format.js';
import { catchError, makeTempDir, makeTensor, removeTempDirs, toInput } from './helpers.js';

afterEach(removeTempDirs);

const SHARD = 'model-00001-of-00002.safetensors';
const FILE_STAMP = '480:1733400000123456789:1733400000123456789:42';
/** Slices of 480 bytes: S1 bound to `a`, S2 to `c`, S3 unbound. */
const S1 = { shardName: SHARD, offsetBytes: 0, sizeBytes: 480 };
const S2 = { shardName: SHARD, offsetBytes: 480, sizeBytes: 480 };
const S3 = { shardName: SHARD, offsetBytes: 960, sizeBytes: 480 };

/** A closed cache of four entries of one shape, a b c d: S1 bound to a, S2 to c. */
async function makeBoundCache() {
  const root = await makeTempDir();
  const [a, b, c, d] = [11, 12, 13, 14].map((seed) => makeTensor([40, 6], seed)) as [ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>, ReturnType<typeof makeTensor>];
  const store = await openCacheStore(root, { create: true });
  await store.addEntries([
    toInput(a, 'a.weight', [[S1.shardName, S1.offsetBytes, S1.sizeBytes]]),
    toInput(b, 'b.weight'),
    toInput(c, 'c.weight', [[S2.shardName, S2.offsetBytes, S2.sizeBytes]]),
    toInput(d, 'd.weight'),
  ]);
  await store.close(); // folded: the journal is its header alone
  return { root, a, b, c, d };
}

function ownerOf(store: CacheStore, slice: typeof S1): string | undefined {
  return store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.key;
}

async function journalOps(root: string, generation: number) {
  const bytes = new Uint8Array(await readFile(join(root, `journal.${generation}`)));
  return scanJournalRecords(bytes.subarray(JOURNAL_HEADER_BYTES), JOURNAL_HEADER_BYTES, 'journal').records.map((r) => r.ops);
}

/**
 * Runs `between` once, right after `store`'s next refresh: aliasSlices refreshes, then looks, so
 * another writer's change made there lands between the caller's look and its commit. Returns
 * whether it ran.
 */
function raceAfterNextRefresh(store: CacheStore, between: () => Promise<void>): () => boolean {
  const refresh = store.refresh.bind(store);
  let raced = false;
  store.refresh = async () => {
    await refresh();
    if (raced) return;
    raced = true;
    await between();
  };
  return () => raced;
}

describe('aliasSlices with moveFrom (directory cache)', () => {
  it('moves a slice bound to moveFrom: one rebind op appended to the journal, manifest.json untouched; reopened from disk (a replay of that op) it reads back and verifies', async () => {
    const { root, a, b } = await makeBoundCache();
    const manifestBefore = await readFile(join(root, 'manifest.json'));
    const manifestStat = await stat(join(root, 'manifest.json'));
    const store = await openCacheStore(root, { compactOnClose: false });
    const generation = store.generation;
    expect(await store.aliasSlices([{ key: b.key, ...S1, stamp: FILE_STAMP, moveFrom: a.key }])).toEqual([true]);
    expect(store.lookupSliceBinding(S1.shardName, S1.offsetBytes, S1.sizeBytes)).toMatchObject({ entry: { key: b.key }, stamps: [FILE_STAMP] });
    expect(store.getEntry(a.key)!.sliceKeys).toEqual([]);
    expect(store.generation).toBe(generation);
    await store.close();

    // A journal append, not a compaction: the manifest is the same file, the op the existing 'rebind'.
    expect(await readFile(join(root, 'manifest.json'))).toEqual(manifestBefore);
    expect((await stat(join(root, 'manifest.json'))).mtimeMs).toBe(manifestStat.mtimeMs);
    expect(await journalOps(root, generation)).toEqual([[{ kind: 'rebind', key: b.key, slice: [S1.shardName, S1.offsetBytes, S1.sizeBytes, [FILE_STAMP]] }]]);

    const reopened = await openCacheStore(root, { compactOnClose: false });
    try {
      expect(ownerOf(reopened, S1)).toBe(b.key);
      expect(reopened.getEntry(a.key)!.sliceKeys).toEqual([]);
      expect((await reopened.verify({ decode: true })).ok).toBe(true);
    } finally {
      await reopened.close();
    }
  });

  it('leaves a slice bound to a third entry alone (false, no SLICE_CONFLICT) while the rest of the batch is bound: an unbound slice, a move, one bound to the key already (its stamp merged)', async () => {
    const { root, a, b, c, d } = await makeBoundCache();
    const store = await openCacheStore(root);
    try {
      const results = await store.aliasSlices([
        { key: b.key, ...S2, moveFrom: a.key }, // bound to c: another writer's binding
        { key: b.key, ...S3, moveFrom: a.key }, // unbound
        { key: d.key, ...S1, moveFrom: a.key }, // bound to a: moved
      ]);
      expect(results).toEqual([false, true, true]);
      expect(ownerOf(store, S2)).toBe(c.key);
      expect(ownerOf(store, S3)).toBe(b.key);
      expect(ownerOf(store, S1)).toBe(d.key);
      // Bound to the key already: true, and the stamp merges as without moveFrom.
      expect(await store.aliasSlices([{ key: d.key, ...S1, stamp: FILE_STAMP, moveFrom: a.key }])).toEqual([true]);
      expect(store.lookupSliceBinding(S1.shardName, S1.offsetBytes, S1.sizeBytes)?.stamps).toEqual([FILE_STAMP]);
      // rebind: true moves from any entry; moveFrom changes nothing then.
      expect(await store.aliasSlices([{ key: b.key, ...S2, moveFrom: a.key }], { rebind: true })).toEqual([true]);
      expect(ownerOf(store, S2)).toBe(b.key);
    } finally {
      await store.close();
    }
    const reopened = await openCacheStore(root);
    try {
      expect([S1, S2, S3].map((s) => ownerOf(reopened, s))).toEqual([d.key, b.key, b.key]);
      expect((await reopened.verify()).ok).toBe(true);
    } finally {
      await reopened.close();
    }
  });

  it('a binding another writer makes between the caller\'s look and its commit wins: decided under the writer lock, against the caught-up state', async () => {
    const { root, a, b, c } = await makeBoundCache();
    const store = await openCacheStore(root);
    const other = await openCacheStore(root);
    try {
      // aliasSlices refreshes, then looks (S1 bound to a): the other writer moves S1 to c right after.
      const raced = raceAfterNextRefresh(store, async () => {
        expect(await other.aliasSlices([{ key: c.key, ...S1 }], { rebind: true })).toEqual([true]);
      });
      expect(await store.aliasSlices([{ key: b.key, ...S1, moveFrom: a.key }])).toEqual([false]);
      expect(raced()).toBe(true);
      expect(ownerOf(store, S1)).toBe(c.key);
      // Likewise for a slice unbound when looked at: the other writer's plain alias stands.
      raceAfterNextRefresh(store, async () => {
        expect(await other.aliasSlices([{ key: a.key, ...S3 }])).toEqual([true]);
      });
      expect(await store.aliasSlices([{ key: b.key, ...S3, moveFrom: c.key }])).toEqual([false]);
      expect(ownerOf(store, S3)).toBe(a.key);
    } finally {
      await Promise.all([store.close(), other.close()]);
    }
    const reopened = await openCacheStore(root);
    try {
      expect(ownerOf(reopened, S1)).toBe(c.key);
      expect(ownerOf(reopened, S3)).toBe(a.key);
    } finally {
      await reopened.close();
    }
  });

  it('an item repeating an earlier one of the call (the same slice and key) is answered as that one is in the commit: false when the move lost', async () => {
    const { root, a, b, c } = await makeBoundCache();
    const store = await openCacheStore(root);
    const other = await openCacheStore(root);
    try {
      raceAfterNextRefresh(store, async () => void (await other.aliasSlices([{ key: c.key, ...S1 }], { rebind: true })));
      // The look plans the first item's move, so the draft shows the second bound already; the commit sees c.
      const results = await store.aliasSlices([
        { key: b.key, ...S1, moveFrom: a.key },
        { key: b.key, ...S1, moveFrom: a.key },
        { key: b.key, ...S1, moveFrom: a.key, stamp: FILE_STAMP },
      ]);
      expect(ownerOf(store, S1)).toBe(c.key);
      expect(results).toEqual([false, false, false]);
      // Not racing, both are true: the move and the repeat that merges its stamp.
      expect(await store.aliasSlices([{ key: b.key, ...S1, moveFrom: c.key }, { key: b.key, ...S1, moveFrom: c.key, stamp: FILE_STAMP }])).toEqual([true, true]);
      expect(ownerOf(store, S1)).toBe(b.key);
    } finally {
      await Promise.all([store.close(), other.close()]);
    }
  });

  it('a moveFrom that is not a content key is INVALID_ARGUMENT, before anything is written', async () => {
    const { root, a, b } = await makeBoundCache();
    const store = await openCacheStore(root);
    try {
      for (const moveFrom of ['nope', a.key.toUpperCase(), 42, null]) {
        const error = await catchError(() => store.aliasSlices([{ key: b.key, ...S3 }, { key: b.key, ...S1, moveFrom: moveFrom as string }]));
        expect(error, String(moveFrom)).toMatchObject({ code: 'INVALID_ARGUMENT' });
      }
      expect(ownerOf(store, S3)).toBeUndefined();
      expect(ownerOf(store, S1)).toBe(a.key);
    } finally {
      await store.close();
    }
  });
});
