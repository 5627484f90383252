// A local cache whose journal header is damaged opens and serves what it can read, but the store
// refuses every write (JOURNAL_INVALID) until `splitzip build --repair` sets the journal aside. An
// unchecked tensor's detail said "its stamp is being recorded … for other processes" while every
// record failed, so every process hashed every tensor again, and nothing told the embedder.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, tunedWeights, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('damaged-journal'));
});
afterAll(async () => {
  await cleanup?.();
});

it('unchecked tensors say their stamps cannot be recorded, naming the damage and its repair; totals.journalDamage', async () => {
  const tensors = tunedWeights(['a', 'b', 'c'], 31);
  const base = await writeModel(join(root, 'base'), tensors, 1 << 20, 'model');
  const cacheDir = join(root, 'cache');
  await buildCache(base, cacheDir);
  await base.close();
  // A copy of the model (new files: the bindings have no record of their stamps): its tensors are unchecked.
  const copy = await writeModel(join(root, 'copy'), tensors, 1 << 20, 'model');
  const journal = (await readdir(cacheDir)).find((name) => /^journal\.\d+$/.test(name));
  expect(journal).toBeDefined();
  const bytes = await readFile(join(cacheDir, journal!));
  bytes.fill(0xff, 0, 8);
  await writeFile(join(cacheDir, journal!), bytes);
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(copy, cache, { backend: 'cpu' });
    await load.drain();
    const unchecked = load.reports.filter((report) => report.reason === 'unchecked');
    expect(unchecked.length).toBe(tensors.length);
    for (const report of unchecked) {
      expect(report.detail).toContain("its stamp cannot be recorded: the cache's journal is damaged (JOURNAL_INVALID: ");
      expect(report.detail).toContain(`\`splitzip verify ${cacheDir}\``);
      expect(report.detail).toContain(`\`splitzip build <model> --out ${cacheDir} --repair\``);
      expect(report.detail).not.toContain('is being recorded');
    }
    expect(load.totals.journalDamage).toMatchObject({ code: 'JOURNAL_INVALID', message: expect.stringContaining('--repair') });
    // What the detail says is what happens: nothing is recorded.
    const stamps = await cache.flushObjectStamps!();
    expect(stamps.recorded).toBe(0);
    expect(stamps.lastError?.code).toBe('JOURNAL_INVALID');
  } finally {
    await cache.close();
    await copy.close();
  }
});

it('a healthy journal: no journalDamage, and the stamps are recorded', async () => {
  const tensors = tunedWeights(['d', 'e'], 47);
  const base = await writeModel(join(root, 'base2'), tensors, 1 << 20, 'model');
  const cacheDir = join(root, 'cache2');
  await buildCache(base, cacheDir);
  await base.close();
  const copy = await writeModel(join(root, 'copy2'), tensors, 1 << 20, 'model');
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(copy, cache, { backend: 'cpu' });
    await load.drain();
    expect(load.totals.journalDamage).toBeUndefined();
    for (const report of load.reports) expect(report.detail).toContain('its stamp is being recorded with the binding for other processes');
    expect((await cache.flushObjectStamps!()).recorded).toBe(tensors.length);
  } finally {
    await cache.close();
    await copy.close();
  }
});
