// A loader whose cache handle still holds the state from before a `splitzip gc
// --drop-unbound-entries` (no refresh since: `refresh: false` here; a load that refreshed at its
// start while the gc ran is the same, but its read-ahead makes the timing a race): a tensor bound in that state to an entry the gc removed finds the blob gone.
// It is served raw, bit-exact, as `missing` with a detail naming the removal (the refreshed state no
// longer holds the entry), not as a `cache-failed` failure with a repair hint; the next load is a
// plain miss. With `cacheOnly` it is NOT_CACHED (`missing`), as any tensor without an entry, on
// every load path (it was the cache error, CACHE_READ_FAILED with a --repair hint); loadTensorToDevice
// serves it as loadModel does. A bare slice request (no model to read raw from) is SLICE_NOT_FOUND,
// as a slice the cache does not have, naming the removal (it was the cache error with a --repair
// hint), unless the refreshed cache binds the slice to another entry (a build --rebind moved it, then
// the gc removed the old entry): served from that entry. A blob that is missing while its entry is still there stays `cache-failed`, and on an
// s3:// cache (its refresh lists the whole prefix) a missing blob is not refreshed for.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createKernels } from '@splitzip/kernels/node';
import { openCacheStore } from '@splitzip/store';
import { afterEach, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { loadTensorToDevice } from '../src/load-tensor-to-device.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import type { LoadReason } from '../src/types.js';
import { buildCache, openCachedModel, readAllRaw, sameBytes, tunedWeights, writeModel, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

/** What `splitzip gc --model ... --drop-unbound-entries` does to a.weight, through another handle: its binding, then its entry and blob, go. */
async function dropTensorEntry(f: CachedModelFixture, name: string): Promise<string> {
  const tensor = f.model.tensors.find((t) => t.name === name)!;
  const store = await openCacheStore(join(f.dir, 'cache'), { compactOnClose: false });
  try {
    expect(await store.unbindSlices([{ ...tensor.slice }])).toBe(1);
    const report = await store.dropUnboundEntries();
    expect(report.entries.map((e) => e.qualname)).toEqual([name]);
    return report.entries[0]!.key;
  } finally {
    await store.close();
  }
}

/** Every way an entry goes, named: not only the gc. */
const droppedWhy = (key: string): string =>
  `its entry ${key} was removed from the cache since this handle's last refresh (by \`splitzip gc --drop-unbound-entries\`, a damaged manifest's recovery, or the cache deleted and built again)`;

async function loadAll(f: CachedModelFixture, options: Parameters<typeof loadModel>[2]): Promise<{ reasons: Record<string, LoadReason>; details: Record<string, string>; fallbacks: number }> {
  const load = loadModel(f.model, f.cache, options);
  for await (const tensor of load) expect(sameBytes(tensor.data, f.raw.get(tensor.name)!), tensor.name).toBe(true);
  return {
    reasons: Object.fromEntries(load.reports.map((r) => [r.name, r.reason])),
    details: Object.fromEntries(load.reports.map((r) => [r.name, r.detail ?? ''])),
    fallbacks: load.totals.fallbacks,
  };
}

describe('a load through a handle that has not seen the gc', () => {
  for (const backend of ['cpu', undefined] as const) {
    it(`serves the dropped entry's tensor raw, bit-exact, as missing (the entry removed), the others cached (backend ${backend ?? 'default'})`, async () => {
      fixture = await openCachedModel('gc-dropped', tunedWeights(['a', 'b', 'c'], 4100));
      const key = await dropTensorEntry(fixture, 'a.weight');
      const first = await loadAll(fixture, { refresh: false, ...(backend === undefined ? {} : { backend }) });
      expect(first.reasons).toEqual({ 'a.weight': 'missing', 'b.weight': 'cached', 'c.weight': 'cached' });
      expect(first.details['a.weight']).toBe(`${droppedWhy(key)}: served raw`);
      expect(first.fallbacks).toBe(0);
      // The handle refreshed on the way: the next load is a plain miss.
      const second = await loadAll(fixture, { refresh: false, ...(backend === undefined ? {} : { backend }) });
      expect(second.reasons['a.weight']).toBe('missing');
      expect(second.details['a.weight']).toMatch(/^no entry for this slice/);
    });
  }
});

describe('cacheOnly, through a handle that has not seen the gc', () => {
  it('loadTensor, loadTensorToDevice and loadModel throw NOT_CACHED (missing) naming the removal, no --repair hint; without cacheOnly the device path serves it raw as missing', async () => {
    fixture = await openCachedModel('gc-dropped-cache-only', tunedWeights(['a', 'b', 'c'], 4200));
    const kernels = await createKernels({ backend: 'cpu' });
    const { model } = fixture;
    // One handle per load path, each opened before the gc: each is the first to find the blob gone.
    const handles: ShardCache[] = [];
    for (let i = 0; i < 4; i++) handles.push(await openShardCache(join(fixture.dir, 'cache')));
    try {
      const key = await dropTensorEntry(fixture, 'a.weight');
      const slice = model.tensors.find((t) => t.name === 'a.weight')!.slice;
      const errors = [
        await loadTensor({ model, name: 'a.weight' }, { cache: handles[0]!, cacheOnly: true }).catch((error: unknown) => error),
        await loadTensorToDevice({ model, name: 'a.weight' }, { cache: handles[1]!, cacheOnly: true, kernels }).catch((error: unknown) => error),
        await loadModel(model, handles[2]!, { cacheOnly: true, refresh: false, filter: (t) => t.name === 'a.weight' }).drain().catch((error: unknown) => error),
      ] as (Error & { code: string; details: Record<string, unknown> })[];
      for (const error of errors) {
        expect(error).toMatchObject({ code: 'NOT_CACHED', details: { tensor: 'a.weight', reason: 'missing', key, ...slice } });
        expect(error.message).toBe(`a.weight is not in the cache (${droppedWhy(key)})`);
        expect(error.message).not.toContain('--repair');
      }
      const device = await loadTensorToDevice({ model, name: 'a.weight' }, { cache: handles[3]!, kernels });
      expect(device.source).toBe('raw');
      expect(device.reason).toBe('missing');
      expect(device.report.detail).toBe(`${droppedWhy(key)}: served raw`);
      expect(device.report.error).toBeUndefined();
      expect(sameBytes(device.data!, fixture.raw.get('a.weight')!)).toBe(true);
    } finally {
      for (const handle of handles) await handle.close();
    }
  });
});

describe('a bare slice request, through a handle that has not seen the gc', () => {
  it('loadTensor and loadTensorToDevice throw SLICE_NOT_FOUND naming the removal, cacheOnly or not, no --repair hint; the next request is a plain SLICE_NOT_FOUND', async () => {
    fixture = await openCachedModel('gc-dropped-bare-slice', tunedWeights(['a', 'b', 'c'], 4400));
    const kernels = await createKernels({ backend: 'cpu' });
    const slice = fixture.model.tensors.find((t) => t.name === 'a.weight')!.slice;
    const handles: ShardCache[] = [];
    for (let i = 0; i < 4; i++) handles.push(await openShardCache(join(fixture.dir, 'cache')));
    try {
      for (const handle of handles) expect(handle.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toBeDefined();
      const key = await dropTensorEntry(fixture, 'a.weight');
      const errors = [
        await loadTensor({ ...slice }, { cache: handles[0]! }).catch((error: unknown) => error),
        await loadTensor({ ...slice }, { cache: handles[1]!, cacheOnly: true }).catch((error: unknown) => error),
        await loadTensorToDevice({ ...slice }, { cache: handles[2]!, kernels }).catch((error: unknown) => error),
        await loadTensorToDevice({ ...slice }, { cache: handles[3]!, kernels, cacheOnly: true }).catch((error: unknown) => error),
      ] as (Error & { code: string; details: Record<string, unknown> })[];
      const where = `${slice.shardName}@${slice.offsetBytes}+${slice.sizeBytes}`;
      for (const error of errors) {
        expect(error).toMatchObject({ code: 'SLICE_NOT_FOUND', details: { ...slice, key } });
        expect(error.message).toBe(`slice ${where} matches no cache entry (${droppedWhy(key)}), and no model was given to read it raw`);
        expect(error.message).not.toContain('--repair');
      }
      // The handle refreshed on the way: the next request is an unbound slice's.
      const again = (await loadTensor({ ...slice }, { cache: handles[0]! }).catch((error: unknown) => error)) as Error & { code: string };
      expect(again).toMatchObject({ code: 'SLICE_NOT_FOUND', message: `slice ${where} matches no cache entry, and no model was given to read it raw` });
      // The other tensors' slices are served from the cache as before.
      const b = fixture.model.tensors.find((t) => t.name === 'b.weight')!.slice;
      const served = await loadTensor({ ...b }, { cache: handles[0]! });
      expect(served.source).toBe('cache');
      expect(sameBytes(served.data, fixture.raw.get('b.weight')!)).toBe(true);
    } finally {
      for (const handle of handles) await handle.close();
    }
  });
});

describe('a bare slice whose entry went because the slice was moved to other bytes (build --rebind, then the gc)', () => {
  it('loadTensor and loadTensorToDevice serve the entry the refreshed cache binds it to, from the cache (they failed SLICE_NOT_FOUND saying no entry matched)', async () => {
    fixture = await openCachedModel('gc-dropped-rebound', tunedWeights(['a', 'b', 'c'], 4600));
    const kernels = await createKernels({ backend: 'cpu' });
    const slice = fixture.model.tensors.find((t) => t.name === 'b.weight')!.slice;
    const handles = [await openShardCache(join(fixture.dir, 'cache')), await openShardCache(join(fixture.dir, 'cache'))];
    // The fine-tune: b changed, the same file name and layout, built with --rebind into the cache.
    const tunedDir = join(fixture.dir, 'tuned');
    const tuned = await writeModel(tunedDir, tunedWeights(['a', 'b', 'c'], 4600, 77));
    try {
      const oldKey = handles[0]!.lookupBySlice(slice.shardName, slice.offsetBytes, slice.sizeBytes)!.key;
      const keys = await buildCache(tuned, join(fixture.dir, 'cache'), { rebind: true });
      const store = await openCacheStore(join(fixture.dir, 'cache'), { compactOnClose: false });
      try {
        expect((await store.dropUnboundEntries()).entries.map((e) => e.key)).toEqual([oldKey]);
      } finally {
        await store.close();
      }
      const expected = (await readAllRaw(tuned)).get('b.weight')!;
      const host = await loadTensor({ ...slice }, { cache: handles[0]! });
      expect(host.source).toBe('cache');
      expect(host.report.key).toBe(keys.get('b.weight'));
      expect(sameBytes(host.data, expected)).toBe(true);
      const device = await loadTensorToDevice({ ...slice }, { cache: handles[1]!, kernels });
      expect(device.source).toBe('cache');
      expect(sameBytes(new Uint8Array((await device.device!.toArray()).buffer), expected)).toBe(true);
      device.device!.delete();
    } finally {
      for (const handle of handles) await handle.close();
      await tuned.close();
    }
  });
});

it('a blob missing while its entry is still there stays cache-failed, with its repair hint', async () => {
  fixture = await openCachedModel('gc-dropped-damage', tunedWeights(['a', 'b', 'c'], 4300));
  const entry = fixture.cache.lookupBySlice(...(Object.values(fixture.model.tensors.find((t) => t.name === 'b.weight')!.slice) as [string, number, number]))!;
  await rm(join(fixture.dir, 'cache', entry.blob));
  const result = await loadAll(fixture, { backend: 'cpu' });
  expect(result.reasons['b.weight']).toBe('cache-failed');
  expect(result.details['b.weight']).toMatch(/BLOB_MISSING.*--repair/);
  expect(result.fallbacks).toBe(1);
});

it('on an s3:// cache (a handle that says remote) a missing blob is cache-failed without a refresh: its refresh lists the whole prefix, and a drop there removes only entries bound to nothing', async () => {
  fixture = await openCachedModel('gc-dropped-remote', tunedWeights(['a', 'b', 'c'], 4500));
  const handle = await openShardCache(join(fixture.dir, 'cache'));
  try {
    // A local handle saying it is remote: the entry goes as on a local cache, so a refresh would
    // find it gone; an s3:// handle does not look.
    await dropTensorEntry(fixture, 'a.weight');
    let refreshes = 0;
    const remote: ShardCache = {
      ...handle,
      remote: true,
      refresh: async () => {
        refreshes++;
        await handle.refresh();
      },
    };
    const load = loadModel(fixture.model, remote, { refresh: false, backend: 'cpu' });
    for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!), tensor.name).toBe(true);
    const a = load.reports.find((r) => r.name === 'a.weight')!;
    expect(a.reason).toBe('cache-failed');
    expect(a.detail).toMatch(/BLOB_MISSING/);
    expect(refreshes).toBe(0);
  } finally {
    await handle.close();
  }
});
