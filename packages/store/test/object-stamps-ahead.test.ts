// Object stamps rank ahead of file stamps past MAX_SLICE_STAMPS, but only the
// MAX_OBJECT_STAMPS_AHEAD recorded last: an ETag holds no time, so versions read once and never
// again kept 15 slots for good, and 4 local files loaded in turn pushed each other out at every
// load (review of 4277873). And isSliceStampKept, which says whether a record would keep a stamp.
import { describe, expect, it } from 'vitest';
import { isSliceStampKept, MAX_OBJECT_STAMPS_AHEAD, MAX_SLICE_STAMPS, openCacheStore } from '../src/index.js';
import { mergeSliceStamps } from '../src/merge-slice-stamps.js';
import { createRng, makeTempDir, makeTensor, toInput } from './helpers.js';

const SHARD = 'model-00001-of-00002.safetensors';
const SIZE_BYTES = 480; // makeTensor([40, 6])
const objectStamp = (n: number): string => `etag:"${String(n).padStart(32, '0')}"`;
/** File i, changed at `ctimeRank` (higher: later). */
const fileStamp = (i: number, ctimeRank: number): string => `9000:1733400000000000000:${1733400000000000000 + ctimeRank * 1000}:${100 + i}`;
const OLD_OBJECTS = Array.from({ length: MAX_SLICE_STAMPS - 1 }, (_, n) => objectStamp(n));
const FILES = [1, 2, 3, 4].map((i) => fileStamp(i, i));

/** Loads `order` in turn `rounds` times against `start`, recording each miss as a reader does; misses per round. */
function loadInTurn(order: readonly string[], rounds: number, start: readonly string[]): { misses: number[]; list: readonly string[] } {
  let list = start;
  const misses: number[] = [];
  for (let round = 0; round < rounds; round++) {
    let count = 0;
    for (const stamp of order) {
      if (list.includes(stamp)) continue;
      count++;
      list = mergeSliceStamps(list, [stamp]);
    }
    misses.push(count);
  }
  return { misses, list };
}

describe('object stamps past MAX_OBJECT_STAMPS_AHEAD', () => {
  it('15 stale object versions do not starve 4 files: no miss after the first round, the 8 latest objects kept', () => {
    const start = loadInTurn(OLD_OBJECTS, 1, []).list;
    expect(start).toEqual(OLD_OBJECTS);
    const { misses, list } = loadInTurn(FILES, 3, start);
    expect(misses).toEqual([4, 0, 0]);
    expect(list.filter((stamp) => FILES.includes(stamp)).sort()).toEqual([...FILES].sort());
    // The 8 recorded last rank ahead; the older ones fill what the files leave, most recent first.
    expect(list.filter((stamp) => !FILES.includes(stamp))).toEqual(OLD_OBJECTS.slice(-(MAX_SLICE_STAMPS - FILES.length)));
    // An object read again (a live version among them) and the files: still no miss.
    const live = loadInTurn([...FILES, objectStamp(99)], 3, start);
    expect(live.misses.slice(1)).toEqual([0, 0]);
  });

  it('keeps the last of each kind: 40 objects beside one file, 40 files beside one object', () => {
    let stamps: readonly string[] = [fileStamp(0, 0)];
    for (let n = 0; n < 40; n++) stamps = mergeSliceStamps(stamps, [objectStamp(n)]);
    expect(stamps).toEqual([fileStamp(0, 0), ...Array.from({ length: MAX_SLICE_STAMPS - 1 }, (_, n) => objectStamp(40 - (MAX_SLICE_STAMPS - 1) + n))]);
    let files: readonly string[] = [objectStamp(0)];
    for (let i = 0; i < 40; i++) files = mergeSliceStamps(files, [fileStamp(i, i)]);
    expect(files).toContain(objectStamp(0));
    expect(files).toHaveLength(MAX_SLICE_STAMPS);
  });

  it('a reader merging the journalled list into the one it had gets that list (replay agrees), with more objects than the cap', () => {
    const rng = createRng(8123);
    const pool = [...Array.from({ length: 20 }, (_, i) => fileStamp(i, (i * 7) % 20)), ...Array.from({ length: 3 * MAX_OBJECT_STAMPS_AHEAD }, (_, n) => objectStamp(n)), '80:17334'];
    for (let trial = 0; trial < 300; trial++) {
      let writer: readonly string[] = [];
      for (let step = 0; step < 60; step++) {
        const adding = [pool[Math.floor(rng() * pool.length)]!];
        if (adding.every((stamp) => writer.includes(stamp))) continue;
        const next = mergeSliceStamps(writer, adding);
        if (writer.length === next.length && next.every((stamp) => writer.includes(stamp))) continue; // nothing journalled
        expect(mergeSliceStamps(writer, next)).toEqual(next);
        expect(next.length).toBeLessThanOrEqual(MAX_SLICE_STAMPS);
        writer = next;
      }
    }
  });

  it('through the store: the files settle beside 15 old objects, and a replay and a compaction give the same list', async () => {
    const root = await makeTempDir();
    const tensor = makeTensor([40, 6], 611);
    const store = await openCacheStore(root, { create: true, compactOnClose: false });
    await store.addEntries([toInput(tensor, 'layers.0.weight', [[SHARD, 0, SIZE_BYTES, [OLD_OBJECTS[0]!]]])]);
    for (const stamp of OLD_OBJECTS.slice(1)) await store.aliasSlice(tensor.key, SHARD, 0, SIZE_BYTES, stamp);
    const stampsOf = () => store.lookupSliceBinding(SHARD, 0, SIZE_BYTES)!.stamps;
    const missesPerRound: number[] = [];
    for (let round = 0; round < 3; round++) {
      let misses = 0;
      for (const stamp of FILES) {
        if (stampsOf().includes(stamp)) continue;
        misses++;
        expect(await store.aliasSlice(tensor.key, SHARD, 0, SIZE_BYTES, stamp)).toBe(true);
      }
      missesPerRound.push(misses);
    }
    expect(missesPerRound).toEqual([4, 0, 0]);
    const kept = stampsOf();
    const reader = await openCacheStore(root);
    expect(reader.lookupSliceBinding(SHARD, 0, SIZE_BYTES)?.stamps).toEqual(kept);
    await reader.close();
    await store.compact();
    await store.close();
    const again = await openCacheStore(root);
    expect(again.lookupSliceBinding(SHARD, 0, SIZE_BYTES)?.stamps).toEqual(kept);
    await again.close();
  });
});

describe('isSliceStampKept', () => {
  const SIXTEEN = Array.from({ length: MAX_SLICE_STAMPS }, (_, i) => fileStamp(i, 10 + i));

  it('is false only for a stamp that ranks last in a full binding (a file changed before all 16 held)', () => {
    expect(isSliceStampKept(SIXTEEN, fileStamp(50, 1))).toBe(false);
    expect(isSliceStampKept(SIXTEEN, fileStamp(51, 99))).toBe(true); // changed after some held: takes a slot
    expect(isSliceStampKept(SIXTEEN, SIXTEEN[0]!)).toBe(true); // held already
    expect(isSliceStampKept(SIXTEEN.slice(1), fileStamp(50, 1))).toBe(true); // a free slot
    expect(isSliceStampKept(SIXTEEN, objectStamp(7))).toBe(true); // an object recorded now ranks ahead
    // The rule's own answer: what the merge keeps.
    for (const stamp of [fileStamp(50, 1), fileStamp(51, 99)]) expect(isSliceStampKept(SIXTEEN, stamp)).toBe(mergeSliceStamps(SIXTEEN, [stamp]).includes(stamp));
  });
});
