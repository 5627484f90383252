// A manifest.json damaged on disk after the cache was opened (a bad copy, a full disk in another
// tool, tampering) made every later loadModel throw CACHE_READ_FAILED from its start-of-load
// refresh, although the handle's snapshot is still correct and every blob read is checked: a
// long-running loader could no longer load its model at all. Now the load goes on with the
// snapshot and reports the refresh failure, as it does for a store it cannot reach.
import { writeFile } from 'node:fs/promises';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { loadModel, RuntimeError } from '../src/index.js';
import { openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;

beforeEach(async () => {
  fixture = await openCachedModel('refresh-damaged');
});
afterEach(async () => {
  await fixture.close();
});

it('a load goes on with the snapshot when manifest.json is damaged after the cache was opened', async () => {
  const cachedBefore = (await loadModel(fixture.model, fixture.cache).drain()).fromCache;
  expect(cachedBefore).toBeGreaterThan(0);
  await writeFile(`${fixture.dir}/cache/manifest.json`, '{"format": 2, "entries": {"trunc');
  const load = loadModel(fixture.model, fixture.cache);
  for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array)).toBe(true);
  expect(load.totals.fromCache).toBe(cachedBefore);
  expect(load.totals.refreshError?.code).toBe('MANIFEST_INVALID');
  // Only the cache may serve: the failure is the caller's to see.
  const error = await loadModel(fixture.model, fixture.cache, { cacheOnly: true })
    .drain()
    .then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(RuntimeError);
  expect((error as RuntimeError).code).toBe('CACHE_READ_FAILED');
});

it('a refresh failing for another reason (a store aborted on purpose, a bug) still stops the load', async () => {
  for (const code of ['ABORTED', 'INVALID_ARGUMENT', undefined]) {
    const failing = { ...fixture.cache, refresh: () => Promise.reject(Object.assign(new Error(`refresh failed (${String(code)})`), { code })) };
    const error = await loadModel(fixture.model, failing)
      .drain()
      .then(() => undefined, (caught: unknown) => caught);
    expect(error, String(code)).toBeInstanceOf(RuntimeError);
    expect((error as RuntimeError).code).toBe('CACHE_READ_FAILED');
    expect((error as RuntimeError).details).toMatchObject({ storeCode: code });
  }
});

it('a refresh that meets a full disk or quota (the store\'s NO_SPACE) lets the load go on with the snapshot, as IO_ERROR does', async () => {
  for (const code of ['NO_SPACE', 'IO_ERROR']) {
    const failing = { ...fixture.cache, refresh: () => Promise.reject(Object.assign(new Error(`${code}: the disk is full`), { code })) };
    const load = loadModel(fixture.model, failing);
    for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array)).toBe(true);
    expect(load.totals.refreshError?.code, code).toBe(code);
  }
});
