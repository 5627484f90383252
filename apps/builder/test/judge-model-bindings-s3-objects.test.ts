// gc/inspect --model of a local model on an s3:// cache (judgeModelBindings): the bindings of s3://
// revisions (ETag stamps only) are another's, kept, as in a directory cache (isOtherRevisionsBinding,
// FILE-BINDINGS.md phase 3); they were pruned as this file's leftovers. The store is a directory
// cache seen under an s3:// root (the judging reads only root, entries and lookupSliceBindings).
import { createHash } from 'node:crypto';
import { calibrateCodebook, encode } from '@splitzip/codec';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { computeContentKey, openCacheStore, type CacheStore } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { judgeModelBindings } from '../src/judge-model-bindings.js';
import { createTempDir, gaussianBf16, type TempDir, type TensorData } from './helpers/models.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-judge-s3-objects-');
});
afterAll(async () => temp?.cleanup());

const SHARD = 'model-00001-of-00001.safetensors';
const SLICE = { shardName: SHARD, offsetBytes: 0, sizeBytes: 8192 };
const etag = (n: number): string => `etag:"${n.toString(16).padStart(32, '0')}"`;
/** The local model's file: a file stamp with an inode. */
const FILE_STAMP = '8192:1733400000000000011:1733400000000000011:101';

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

/** A local model of the shard name whose tensors lie elsewhere (another layout: a re-shard, another model). */
const localModel = {
  shards: [{ name: SHARD, path: `/models/local/${SHARD}`, stamp: FILE_STAMP }],
  tensors: [],
} as unknown as SafetensorsModel;

it("a local model's judging on an s3:// cache keeps two s3:// revisions' object bindings (other revisions), as a directory cache does", async () => {
  const store = await openCacheStore(`${temp.path}/cache`, { create: true, sliceBindingsPerFile: true });
  try {
    const [a, b] = await addTestEntries(store, [1, 2].map((seed) => gaussianBf16(`t${seed}`, [64, 64], seed)));
    expect(await store.aliasSlices([{ key: a!, ...SLICE, stamp: etag(1) }])).toEqual([true]);
    expect(await store.aliasSlices([{ key: b!, ...SLICE, stamp: etag(2) }])).toEqual([true]);
    const directory = judgeModelBindings(store, localModel, '/models/local', { pruneOtherShards: false });
    expect(directory).toMatchObject({ leftover: 0, otherFileKept: 2, prune: [] });
    const onS3 = new Proxy(store, { get: (target, name) => (name === 'root' ? 's3://bucket/cache/' : Reflect.get(target, name, target)) });
    const judged = judgeModelBindings(onS3, localModel, '/models/local', { pruneOtherShards: false });
    // Before: both pruned as this file's leftovers (isOtherFilesBinding finds no inode in an ETag).
    expect(judged).toMatchObject({ leftover: 0, otherFileKept: 2, prune: [] });
    // A binding with no stamp is still this file's leftover there.
    const [c] = await addTestEntries(store, [gaussianBf16('t3', [64, 64], 3)]);
    expect(await store.aliasSlices([{ key: c!, shardName: SHARD, offsetBytes: 8192, sizeBytes: 8192 }])).toEqual([true]);
    expect(judgeModelBindings(onS3, localModel, '/models/local', { pruneOtherShards: false })).toMatchObject({ leftover: 1, otherFileKept: 2, prune: [{ key: c, verdict: 'leftover' }] });
  } finally {
    await store.close();
  }
});
