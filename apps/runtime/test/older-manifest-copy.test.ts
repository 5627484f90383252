// A cache whose manifest is an older copy put back (a backup restore) beside a newer journal holding
// commits: the store refuses to compact over that journal (it holds the only copy of those commits),
// also at close. A loader still loads every tensor right, and its cache handle's close, after it
// recorded a binding (durable in the journal), must not fail: it threw MANIFEST_INVALID at every close.
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readTensorBytes, type SafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { loadModel, openShardCache } from '../src/index.js';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

let cleanup: () => Promise<void>;
let model: SafetensorsModel;
let cacheDir: string;
let keys: Map<string, string>;

beforeAll(async () => {
  const temp = await makeTempDir('older-copy');
  cleanup = temp.cleanup;
  model = await writeModel(join(temp.dir, 'model'), standardTensors());
  cacheDir = join(temp.dir, 'cache');
  keys = await buildCache(model, cacheDir);
});
afterAll(async () => {
  await model?.close();
  await cleanup?.();
});

it('an older copy of the manifest beside a newer journal: loads are right, and the handle closes after recording a binding', async () => {
  const saved = new Map<string, Buffer>();
  for (const name of await readdir(cacheDir)) if (name === 'manifest.json' || /^journal\.\d+$/.test(name)) saved.set(name, await readFile(join(cacheDir, name)));
  const writer = await openCacheStore(cacheDir, { compactOnClose: false });
  const [key] = [...keys.values()];
  const rawBytes = writer.getEntry(key!)!.rawBytes;
  // A commit, a compaction (the next generation), and a commit only its journal holds.
  expect(await writer.aliasSlice(key!, 'earlier.safetensors', 0, rawBytes)).toBe(true);
  await writer.compact();
  expect(await writer.aliasSlice(key!, 'elsewhere.safetensors', 0, rawBytes)).toBe(true);
  await writer.close();
  for (const [name, data] of saved) await writeFile(join(cacheDir, name), data);

  const cache = await openShardCache(cacheDir);
  let tensors = 0;
  for await (const tensor of loadModel(model, cache, { verifyDigest: true })) {
    tensors += 1;
    const expected = await readTensorBytes(model, model.tensors.find((t) => t.name === tensor.name)!);
    expect(Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength).equals(Buffer.from(expected)), tensor.name).toBe(true);
  }
  expect(tensors).toBe(model.tensors.length);
  expect(await cache.aliasSlice(key!, 'another.safetensors', 0, cache.getEntry(key!)!.rawBytes)).toBe(true);
  await cache.close();
  // The store itself refuses the compaction (its close says so); the binding is in the journal.
  const store = await openCacheStore(cacheDir, { compactOnClose: false });
  try {
    expect(store.lookupBySlice('another.safetensors', 0, store.getEntry(key!)!.rawBytes)?.key).toBe(key);
    expect((await store.verify()).problems[0]?.code).toBe('MANIFEST_INVALID');
  } finally {
    await store.close();
  }
});
