// More files than MAX_SLICE_STAMPS holding one tensor (revisions, fine-tunes, hub copies), loaded in
// turn: the binding keeps the stamps of the 16 most recently changed files (ctime), so the same
// files hit round after round, and only the files past 16 with the oldest ctimes are checked again.
// Through 0.56 the 17th file's record pushed out the oldest recorded stamp, which in a cyclic load
// order was the next file due: every load missed, and every miss journalled an op.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_SLICE_STAMPS, openCacheStore, type CacheStore } from '../src/index.js';
import { HostFileStamps } from '../src/host-file-stamps.js';
import { mergeSliceStamps } from '../src/merge-slice-stamps.js';
import { ReadThroughCache } from '../src/read-through-cache.js';
import { createRng, makeTempDir, makeTensor, toInput } from './helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const SIZE_BYTES = 480; // makeTensor([40, 6]): 240 BF16 values
const FILE_COUNT = MAX_SLICE_STAMPS + 3;
const ROUNDS = 3;

/**
 * File i's stamp: one size and mtime (copies made with `cp -p` or rsync -t), inode 100 + i, and a
 * ctime whose rank (0 oldest) is scrambled against the load order, so that the rule, not the order
 * the files happen to be loaded in, decides which stay.
 */
const ctimeRank = (i: number): number => (i * 7) % FILE_COUNT;
const fileStamp = (i: number): string => `9000:1733400000000000000:${1733400000000000000 + ctimeRank(i) * 1000}:${100 + i}`;
const FILES = Array.from({ length: FILE_COUNT }, (_, i) => fileStamp(i));
/** The stamps of the MAX_SLICE_STAMPS files changed last. */
const NEWEST = FILES.filter((_, i) => ctimeRank(i) >= FILE_COUNT - MAX_SLICE_STAMPS);
const objectStamp = (n: number): string => `etag:"${String(n).padStart(32, '0')}"`;
/** Whether a merge left a list's stamps as they were (the added one left out). */
const isSameStampSet = (before: readonly string[], after: readonly string[]): boolean => before.length === after.length && after.every((stamp) => before.includes(stamp));

/** One load of file `stamp` as a reader does it: trusted where the binding holds the stamp, else checked and recorded. Returns whether it missed. */
async function loadFile(store: CacheStore, key: string, stamp: string): Promise<boolean> {
  if (store.lookupSliceBinding(SHARD, 0, SIZE_BYTES)!.stamps.includes(stamp)) return false;
  expect(await store.aliasSlice(key, SHARD, 0, SIZE_BYTES, stamp)).toBe(true);
  return true;
}

const stampsOf = (store: CacheStore): readonly string[] => store.lookupSliceBinding(SHARD, 0, SIZE_BYTES)!.stamps;

describe('a binding with more files than MAX_SLICE_STAMPS loaded in turn', () => {
  it('keeps the 16 files changed last from the first round on: at most 3 misses a round, nothing journalled for them; a replay and a compaction give the same 16', async () => {
    const root = await makeTempDir();
    const tensor = makeTensor([40, 6], 610);
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    await store.addEntries([toInput(tensor, 'layers.0.weight', [[SHARD, 0, SIZE_BYTES, [FILES[0]!]]])]);
    const journalBytes = async () => (await stat(join(root, `journal.${store.generation}`))).size;

    const missesPerRound: number[] = [];
    const setAfterRound: string[][] = [];
    const journalAfterRound: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      let misses = 0;
      for (const stamp of FILES) if (await loadFile(store, tensor.key, stamp)) misses++;
      missesPerRound.push(misses);
      setAfterRound.push([...stampsOf(store)].sort());
      journalAfterRound.push(await journalBytes());
    }
    // Round one records every file it lacks; from then on the same 16 stay, and only the three
    // files with the oldest ctimes miss (checked again, never recorded: the journal stays as it is).
    expect(missesPerRound[0]).toBe(FILE_COUNT - 1);
    expect(missesPerRound.slice(1)).toEqual([FILE_COUNT - MAX_SLICE_STAMPS, FILE_COUNT - MAX_SLICE_STAMPS]);
    expect(setAfterRound).toEqual([[...NEWEST].sort(), [...NEWEST].sort(), [...NEWEST].sort()]);
    expect(journalAfterRound[2]).toBe(journalAfterRound[0]);
    const kept = stampsOf(store);

    // A reader replaying the journal (every op of the rounds, evictions included) gets the same list.
    const reader = await openCacheStore(root);
    expect(reader.lookupSliceBinding(SHARD, 0, SIZE_BYTES)?.stamps).toEqual(kept);
    await reader.close();
    // As does the manifest a compaction writes, read back.
    await store.compact();
    await store.close();
    const again = await openCacheStore(root);
    expect(again.lookupSliceBinding(SHARD, 0, SIZE_BYTES)?.stamps).toEqual(kept);
    // And a load there changes nothing: the rule is the stamps', not the handle's.
    expect(await loadFile(again, tensor.key, FILES.find((stamp) => !NEWEST.includes(stamp))!)).toBe(true);
    expect(again.lookupSliceBinding(SHARD, 0, SIZE_BYTES)?.stamps).toEqual(kept);
    await again.close();
  });

  it('a new file (a newer ctime than any held) still takes a slot, pushing out the file changed least recently', async () => {
    const held = NEWEST;
    const newer = `9000:1733400000000000000:1733400099000000000:999`;
    const after = mergeSliceStamps(held, [newer]);
    const oldestHeld = FILES.find((_, i) => ctimeRank(i) === FILE_COUNT - MAX_SLICE_STAMPS)!;
    expect(after).toEqual([...held.filter((stamp) => stamp !== oldestHeld), newer]);
    // One changed before every held file is left out: the list is the one there was.
    const older = `9000:1733400000000000000:1733300000000000000:998`;
    expect(isSameStampSet(held, mergeSliceStamps(held, [older]))).toBe(true);
  });
});

describe('mergeSliceStamps past MAX_SLICE_STAMPS', () => {
  /** Cyclic loads of `stamps` against a binding's list, as a reader records them; misses per round. */
  function loadInTurn(stamps: readonly string[], rounds: number): { misses: number[]; list: readonly string[] } {
    let list: readonly string[] = [];
    const misses: number[] = [];
    for (let round = 0; round < rounds; round++) {
      let count = 0;
      for (const stamp of stamps) {
        if (list.includes(stamp)) continue;
        count++;
        list = mergeSliceStamps(list, [stamp]);
      }
      misses.push(count);
    }
    return { misses, list };
  }

  it('keeps object stamps ahead of file stamps: two objects and 19 files in turn, the objects always hit after the first round', () => {
    const objects = [objectStamp(1), objectStamp(2)];
    // Objects between the files, as a host loading one s3:// model and local copies would.
    const order = [...FILES.slice(0, 10), objects[0]!, ...FILES.slice(10), objects[1]!];
    const { misses, list } = loadInTurn(order, ROUNDS);
    expect(misses.slice(1)).toEqual([FILE_COUNT - (MAX_SLICE_STAMPS - 2), FILE_COUNT - (MAX_SLICE_STAMPS - 2)]);
    expect(list).toEqual(expect.arrayContaining(objects));
    expect(list.filter((stamp) => !objects.includes(stamp)).sort()).toEqual(FILES.filter((_, i) => ctimeRank(i) >= FILE_COUNT - (MAX_SLICE_STAMPS - 2)).sort());
  });

  it('files of one ctime (a file system of coarse times) rank by their text: still no churn', () => {
    const sameTime = Array.from({ length: FILE_COUNT }, (_, i) => `9000:1733400000000000000:1733400000000000000:${100 + i}`);
    const { misses } = loadInTurn(sameTime, ROUNDS);
    expect(misses.slice(1)).toEqual([FILE_COUNT - MAX_SLICE_STAMPS, FILE_COUNT - MAX_SLICE_STAMPS]);
  });

  it('a reader merging the journalled list into its own gets that list, whatever came before (replay agrees with the writer)', () => {
    const rng = createRng(4021);
    const pool = [...FILES, ...Array.from({ length: 6 }, (_, n) => objectStamp(n)), '80:17334', '80:17335'];
    for (let trial = 0; trial < 200; trial++) {
      let writer: readonly string[] = [];
      for (let step = 0; step < 40; step++) {
        const adding = [pool[Math.floor(rng() * pool.length)]!];
        const next = mergeSliceStamps(writer, adding);
        if (adding.every((stamp) => writer.includes(stamp)) || isSameStampSet(writer, next)) continue; // nothing journalled
        // The reader holds the list before the op (it replayed the ops before) and merges the op's.
        expect(mergeSliceStamps(writer, next)).toEqual(next);
        expect(next.length).toBeLessThanOrEqual(MAX_SLICE_STAMPS);
        writer = next;
      }
    }
  });
});

describe('host file stamps (s3:// caches) past MAX_SLICE_STAMPS', () => {
  it('keep the 16 files changed last, and write nothing for a file that ranks last', async () => {
    const dir = await makeTempDir();
    const stamps = new HostFileStamps(new ReadThroughCache(dir));
    const KEY = 'c'.repeat(40);
    const slice = [SHARD, 0, SIZE_BYTES] as const;
    const writtenPerRound: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const before = stamps.counts.written;
      for (const stamp of FILES) {
        if (stamps.stampsOf(SHARD, 0, SIZE_BYTES, KEY).includes(stamp)) continue;
        await stamps.record([{ slice, key: KEY, stamp }]);
      }
      writtenPerRound.push(stamps.counts.written - before);
      expect([...stamps.stampsOf(SHARD, 0, SIZE_BYTES, KEY)].sort()).toEqual([...NEWEST].sort());
    }
    expect(writtenPerRound.slice(1)).toEqual([0, 0]);
    expect([...new HostFileStamps(new ReadThroughCache(dir)).stampsOf(SHARD, 0, SIZE_BYTES, KEY)].sort()).toEqual([...NEWEST].sort());
  });
});
