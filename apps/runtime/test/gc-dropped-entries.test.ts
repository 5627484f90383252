// A loader whose cache handle still holds the state from before a `splitzip gc
// --drop-unbound-entries` (no refresh since: `refresh: false` here; a load that refreshed at its
// start while the gc ran is the same, but its read-ahead makes the timing a race): a tensor bound in that state to an entry the gc removed finds the blob gone.
// It is served raw, bit-exact, as `missing` with a detail naming the removal (the refreshed state no
// longer holds the entry), not as a `cache-failed` failure with a repair hint; the next load is a
// plain miss. A blob that is missing while its entry is still there stays `cache-failed`.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { afterEach, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import type { LoadReason } from '../src/types.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

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
      expect(first.details['a.weight']).toBe(`its entry ${key} was removed from the cache (\`splitzip gc --drop-unbound-entries\`) after this handle's last refresh: served raw`);
      expect(first.fallbacks).toBe(0);
      // The handle refreshed on the way: the next load is a plain miss.
      const second = await loadAll(fixture, { refresh: false, ...(backend === undefined ? {} : { backend }) });
      expect(second.reasons['a.weight']).toBe('missing');
      expect(second.details['a.weight']).toMatch(/^no entry for this slice/);
    });
  }
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
