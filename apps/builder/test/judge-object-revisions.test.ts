// judgeSliceBindings in a directory cache (FILE-BINDINGS.md phase 3): a binding recorded with
// another object (ETag) of the shard name, or of the other kind (an object's for a local file, a
// local file's for an object), is another revision's, left beside; this object's own binding to
// other bytes, and a stampless binding, are in the way.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { calibrateCodebook, encode } from '@splitzip/codec';
import { computeContentKey, openCacheStore, type CacheEntry, type CacheStore } from '@splitzip/store';
import { isBesideRefused, judgeSliceBindings } from '../src/judge-slice-bindings.js';
import { createTempDir, gaussianBf16, type TempDir, type TensorData } from './helpers/models.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-judge-objects-');
});
afterAll(async () => temp?.cleanup());

const SLICE = { shardName: 'model-00001-of-00001.safetensors', offsetBytes: 0, sizeBytes: 8192 };
const etag = (n: number): string => `etag:"${n.toString(16).padStart(32, '0')}"`;
const FILE_STAMP = '8192:1733400000000000011:1733400000000000011:101';
const OTHER_FILE_STAMP = '8192:1733400000000000022:1733400000000000022:202';
const LEGACY_FILE_STAMP = '8192:1733400000000000005';

/** Adds each tensor as an entry (unbound); their content keys. */
async function addTestEntries(store: CacheStore, tensors: TensorData[]): Promise<string[]> {
  const inputs = tensors.map((t) => {
    const values = new Uint16Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 2);
    const key = computeContentKey(t.data, t.shape, 'BF16');
    const payload = encode(values, calibrateCodebook(values).codebook, { chunkSize: store.chunkSize });
    return { key, qualname: t.name, payload, shape: t.shape, dtype: 'BF16' as const, sha256: createHash('sha256').update(t.data).digest('hex') };
  });
  await store.addEntries(inputs);
  return inputs.map((input) => input.key);
}

function judge(store: CacheStore, key: string, stamp: string | null) {
  const judged = judgeSliceBindings(store, SLICE, key, stamp, 'file');
  return { inTheWay: judged.inTheWay.map((b) => b.entry.key), otherFiles: judged.otherFiles.map((b) => b.entry.key) };
}

it('another ETag, a local file for an object and an object for a local file: other revisions; the same ETag or none: in the way', async () => {
  const root = `${temp.path}/cache`;
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
  try {
    const [a, b, c] = await addTestEntries(store, [1, 2, 3].map((seed) => gaussianBf16(`t${seed}`, [64, 64], seed)));
    expect(await store.aliasSlices([{ key: a!, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    // Before phase 3 these were in the way (a directory cache judged object stamps unknown): SLICE_CONFLICT.
    expect(judge(store, b!, etag(2))).toEqual({ inTheWay: [], otherFiles: [a] });
    expect(judge(store, b!, FILE_STAMP)).toEqual({ inTheWay: [], otherFiles: [a] });
    // This object (its ETag bound to other bytes), or no stamp: in the way.
    expect(judge(store, b!, etag(1))).toEqual({ inTheWay: [a], otherFiles: [] });
    expect(judge(store, b!, null)).toEqual({ inTheWay: [a], otherFiles: [] });
    expect(await store.aliasSlices([{ key: b!, ...SLICE, stamp: FILE_STAMP }])).toEqual([true]);
    // An object beside a local file's binding (file stamps with an inode only) and another object's.
    expect(judge(store, c!, etag(3))).toEqual({ inTheWay: [], otherFiles: [b, a] });
  } finally {
    await store.close();
  }
});

it("an object at a slice bound with a legacy file stamp (no inode): another's (never unbound nor moved for it), bound beside; the build refuses nothing (isBesideRefused)", async () => {
  const root = `${temp.path}/legacy`;
  const store = await openCacheStore(root, { create: true, sliceBindingsPerFile: true });
  try {
    const [a, b] = await addTestEntries(store, [1, 2].map((seed) => gaussianBf16(`t${seed}`, [64, 64], seed)));
    // A local file's binding from before 2026-12-05 (`<size>:<mtime ns>`): no inode to judge by.
    expect(await store.aliasSlices([{ key: a!, ...SLICE, stamp: LEGACY_FILE_STAMP }])).toEqual([true]);
    // No object's: an object's shard never was that file. (Judged in the way, a plain build unbound it.)
    expect(judge(store, b!, etag(2))).toEqual({ inTheWay: [], otherFiles: [a] });
    // A local file cannot tell it from its own past (no inode recorded): in the way, as before.
    expect(judge(store, b!, FILE_STAMP)).toEqual({ inTheWay: [a], otherFiles: [] });
    const judged = judgeSliceBindings(store, SLICE, b!, etag(2), 'file');
    expect(isBesideRefused(judged, etag(2))).toBe(false);
    // The store binds the object beside it, as judged (FILE-BINDINGS.md phase 3).
    expect(await store.aliasSlices([{ key: b!, ...SLICE, stamp: etag(2) }])).toEqual([true]);
    expect(store.lookupSliceBindings(SLICE.shardName, SLICE.offsetBytes, SLICE.sizeBytes).map((binding) => binding.entry.key).sort()).toEqual([a, b].sort());
  } finally {
    await store.close();
  }
});

it('isBesideRefused: only a stampless binding in the way beside others (the store binds nothing beside it, and its rebind would move theirs)', () => {
  const binding = (key: string, stamps: string[]) => ({ entry: { key } as CacheEntry, stamps });
  const objectOther = binding('a', [etag(1)]);
  const fileOther = binding('b', [FILE_STAMP]);
  const stampless = binding('c', []);
  // Others beside, nothing stampless: phase 3 binds a file's or an object's beside them.
  expect(isBesideRefused({ own: undefined, inTheWay: [], otherFiles: [objectOther, fileOther] }, etag(2))).toBe(false);
  expect(isBesideRefused({ own: undefined, inTheWay: [], otherFiles: [objectOther] }, OTHER_FILE_STAMP)).toBe(false);
  // A stampless binding in the way: an object's rebind moves every binding, a file's the objects'.
  expect(isBesideRefused({ own: undefined, inTheWay: [stampless], otherFiles: [fileOther] }, etag(2))).toBe(true);
  expect(isBesideRefused({ own: undefined, inTheWay: [stampless], otherFiles: [objectOther] }, OTHER_FILE_STAMP)).toBe(true);
  // A file's rebind leaves other inodes' bindings: nothing to refuse.
  expect(isBesideRefused({ own: undefined, inTheWay: [stampless], otherFiles: [fileOther] }, OTHER_FILE_STAMP)).toBe(false);
  // Bound here already: nothing new beside.
  expect(isBesideRefused({ own: fileOther, inTheWay: [stampless], otherFiles: [objectOther] }, etag(2))).toBe(false);
});
