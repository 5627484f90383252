// Revisions of an s3:// model (ByteSource models: shards stamped `etag:"…"`) in one DIRECTORY cache
// (FILE-BINDINGS.md phase 3): both bound side by side, each load served wholly from the cache,
// bit-exact; a load binds an object's tensor beside another binding only where the cache holds such
// a binding already (manifest format 4), never moving it from format 2 or 3; an explicit aliasSlice
// (a build's write) moves it.
import { join } from 'node:path';
import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, objectSource, readAllRaw, sameBytes, writeModel } from './fixtures.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';
import { manifestFormat, name, revisionA, useCleanups } from './helpers/two-revisions.js';

const cleanups = useCleanups();
let dir: string;
/** A, B (layer 2 changed), C (layer 1 changed) as object models, ETags of their own. */
let A: SafetensorsModel;
let B: SafetensorsModel;
let C: SafetensorsModel;
let raw: { A: Map<string, Uint8Array>; B: Map<string, Uint8Array>; C: Map<string, Uint8Array> };

async function objectModel(path: string, etag: string): Promise<SafetensorsModel> {
  const model = await openSafetensorsModel({ source: await objectSource(path, etag) });
  cleanups.push(() => model.close());
  return model;
}

beforeAll(async () => {
  const temp = await makeTempDir('splitzip-object-revisions-');
  cleanups.push(temp.cleanup);
  dir = temp.dir;
  const revisions = {
    A: revisionA(),
    B: revisionA().map((t, k) => (k === 2 ? { ...t, data: bf16Weights(4096, 999) } : t)),
    C: revisionA().map((t, k) => (k === 1 ? { ...t, data: bf16Weights(4096, 777) } : t)),
  };
  for (const [label, tensors] of Object.entries(revisions)) {
    const local = await writeModel(join(dir, label), tensors, 80 * 1024);
    await local.close();
  }
  A = await objectModel(join(dir, 'A'), '"aaaa"');
  B = await objectModel(join(dir, 'B'), '"bbbb"');
  C = await objectModel(join(dir, 'C'), '"cccc"');
  raw = { A: await readAllRaw(A), B: await readAllRaw(B), C: await readAllRaw(C) };
});

/** Loads every tensor of `model` through a fresh cache handle: sources by name. */
async function loadAll(cacheDir: string, model: SafetensorsModel, expected: Map<string, Uint8Array>): Promise<Map<string, string>> {
  const cache = await openShardCache(cacheDir);
  const sources = new Map<string, string>();
  try {
    for await (const t of loadModel(model, cache, { backend: 'cpu' })) {
      expect(sameBytes(t.data, expected.get(t.name)!), t.name).toBe(true);
      sources.set(t.name, t.source === 'cache' ? 'cache' : `${t.source} ${t.reason ?? ''}`);
    }
    await cache.flushObjectStamps!();
  } finally {
    await cache.close();
  }
  return sources;
}

describe('object revisions in one directory cache', () => {
  it('A and B built side by side (their ETags): each load of either is served wholly from the cache, bit-exact; manifest format 4', async () => {
    const cacheDir = join(dir, 'both');
    await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
    // Before phase 3: SLICE_CONFLICT at B's layer 2 (an object's binding took no second one).
    await buildCache(B, cacheDir, { sliceBindingsPerFile: true });
    expect(await manifestFormat(cacheDir)).toBe(4);
    for (const [model, expected] of [[A, raw.A], [B, raw.B], [A, raw.A], [B, raw.B]] as const) {
      expect([...(await loadAll(cacheDir, model, expected)).values()]).toEqual(Array(4).fill('cache'));
    }
  });

  it("B's changed tensor held but bound only for A: stale in format 2 and format 3 (no binding beside, format kept); bound beside once format 4 is held, by an explicit aliasSlice", async () => {
    const cacheDir = join(dir, 'kept');
    await buildCache(A, cacheDir, { sliceBindingsPerFile: true });
    await buildCache(B, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(2)] });
    await buildCache(C, cacheDir, { sliceBindingsPerFile: true, noAlias: [name(1)] });
    expect(await manifestFormat(cacheDir)).toBe(2);
    for (const format of [2, 3]) {
      if (format === 3) await holdSecondBinding(cacheDir);
      for (const round of [1, 2]) {
        const cache = await openShardCache(cacheDir);
        try {
          const t = await loadTensor({ model: B, name: name(2) }, { cache, backend: 'cpu' });
          expect(sameBytes(t.data, raw.B.get(name(2))!)).toBe(true);
          expect(t, `format ${format}, round ${round}`).toMatchObject({ source: 'raw', reason: 'stale' });
          expect(t.report.detail).toContain('manifest format 4, which releases up to 0.57 cannot read');
          expect(await cache.flushObjectStamps!()).toMatchObject({ recorded: 0 });
        } finally {
          await cache.close();
        }
        expect(await manifestFormat(cacheDir)).toBe(format);
      }
    }
    // A build's explicit write binds B's tensor beside A's: format 4.
    const cache = await openShardCache(cacheDir);
    try {
      const slice = B.tensors.find((t) => t.name === name(2))!.slice;
      const key = (await openCacheStore(cacheDir).then(async (store) => {
        try {
          return [...store.entries()].find((entry) => entry.qualname === name(2) && entry.key !== store.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)?.key)!.key;
        } finally {
          await store.close();
        }
      }));
      expect(await cache.aliasSlice!(key, slice.shardName, slice.offsetBytes, slice.sizeBytes, B.shards[0]!.stamp!)).toBe(true);
    } finally {
      await cache.close();
    }
    expect(await manifestFormat(cacheDir)).toBe(4);
    // Now a load binds C's changed tensor beside A's (stale once), then serves it from the cache.
    const first = await loadAll(cacheDir, C, raw.C);
    expect(first.get(name(1))).toBe('raw stale');
    expect([...(await loadAll(cacheDir, C, raw.C)).values()]).toEqual(Array(4).fill('cache'));
    expect([...(await loadAll(cacheDir, B, raw.B)).values()]).toEqual(Array(4).fill('cache'));
    expect([...(await loadAll(cacheDir, A, raw.A)).values()]).toEqual(Array(4).fill('cache'));
  });
});
