// A damaged manifest.json (a flipped bit fails its checksum) made every command refuse the cache,
// and the way out was to remove it and build every model again. build --repair now salvages it
// through the real binary: the entries that still decode to their content keys are kept (a second
// model sharing the cache is not encoded again), the bindings are made again per model.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { calibrateCodebook, encode } from '@splitzip/codec';
import { computeContentKey, openCacheStore } from '@splitzip/store';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-manifest-repair-');
});
afterAll(async () => temp?.cleanup());

it('a flipped bit in the manifest of a cache two models share: build --repair keeps every entry, binds the model again, and the other model needs no encoding', async () => {
  const shared = gaussianBf16('shared', [300, 7], 31);
  const first = await writeSingleFileModel(join(temp.path, 'first.safetensors'), [shared, gaussianBf16('a', [2050], 32)]);
  const second = await writeSingleFileModel(join(temp.path, 'second.safetensors'), [gaussianBf16('b', [2000], 33), shared, gaussianBf16('c', [64, 36], 34)]);
  const cacheDir = join(temp.path, 'cache');
  await runJson<BuildJson>(['build', first, '--out', cacheDir, '--jobs', '0']);
  await runJson<BuildJson>(['build', second, '--out', cacheDir, '--jobs', '0']);
  const path = join(cacheDir, 'manifest.json');
  const bytes = await readFile(path);
  // The last digit of the first binding's offset: the text still parses, the checksum fails.
  const at = bytes.indexOf('"slice_keys":[["') + '"slice_keys":[["'.length;
  const offsetAt = bytes.indexOf(',', bytes.indexOf('"', at) + 1) + 1;
  const digit = bytes.indexOf(',', offsetAt) - 1;
  bytes[digit]! ^= 0x01;
  await writeFile(path, bytes);

  const refused = await runCli(['build', first, '--out', cacheDir, '--jobs', '0']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('manifest checksum mismatch');
  expect(refused.stderr).toContain(`\`splitzip build <model> --out ${cacheDir} --repair\``);

  const { json: repaired } = await runJson<BuildJson>(['build', first, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(repaired.manifest_recovered).toMatchObject({ salvagedEntries: 4, droppedEntries: [], droppedBindings: 5, defaultedSettings: [] });
  expect(Buffer.from(await readFile(repaired.manifest_recovered!.keptAs)).equals(bytes)).toBe(true);
  expect(repaired).toMatchObject({ encoded: 0, cached: 2, aliased: 2 });
  const { json: ok } = await runJson<VerifyJson>(['verify', cacheDir, '--model', first]);
  expect(ok.store.problems).toEqual([]);
  expect(ok.model?.totals.ok).toBe(2);

  // The other model's entries were kept: its build only binds.
  const { json: other } = await runJson<BuildJson>(['build', second, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(other).toMatchObject({ encoded: 0, cached: 3, manifest_recovered: null });
  const { json: otherOk } = await runJson<VerifyJson>(['verify', cacheDir, '--model', second]);
  expect(otherOk.model?.totals.ok).toBe(3);
});

it('an older copy of the manifest put back beside a newer journal holding commits: verify and gc say so, build --repair replays the journal', async () => {
  const first = await writeSingleFileModel(join(temp.path, 'older-first.safetensors'), [gaussianBf16('a', [300, 7], 51)]);
  const second = await writeSingleFileModel(join(temp.path, 'older-second.safetensors'), [gaussianBf16('b', [2000], 52)]);
  const cacheDir = join(temp.path, 'older-cache');
  await runJson<BuildJson>(['build', first, '--out', cacheDir, '--jobs', '0']);
  const saved = new Map<string, Buffer>();
  for (const name of await readdir(cacheDir)) if (name === 'manifest.json' || /^journal\.\d+$/.test(name)) saved.set(name, await readFile(join(cacheDir, name)));
  await runJson<BuildJson>(['build', second, '--out', cacheDir, '--jobs', '0']);
  // A commit after the second build's compaction, left in the journal (a loader's binding, say).
  const extra = gaussianBf16('c', [64, 36], 53);
  const store = await openCacheStore(cacheDir, { compactOnClose: false });
  const bytes = extra.data;
  const values = new Uint16Array(bytes.slice().buffer);
  const payload = encode(values, calibrateCodebook(values).codebook);
  const key = computeContentKey(bytes, extra.shape, 'BF16');
  await store.addEntry({ key, qualname: 'c', payload, shape: extra.shape, dtype: 'BF16', sliceKeys: [['elsewhere.safetensors', 0, bytes.length]] });
  await store.close();
  // The backup put back: the first build's manifest and journal.
  for (const [name, data] of saved) await writeFile(join(cacheDir, name), data);

  const verified = await runCli(['verify', cacheDir]);
  expect(verified.code).toBe(1);
  // Lines past 120 columns go on indented below.
  const flat = verified.stdout.replace(/\n {4,}/g, ' ');
  expect(flat).toMatch(/older than .*journal\.\d+, which holds commits/);
  expect(flat).toContain('--repair` keeps its entries that check out and replays the newer journal');
  const gc = await runCli(['gc', cacheDir]);
  expect(gc.code).toBe(1);
  expect(gc.stderr).toContain('gc refuses');
  // Its manifest reads fine: no "cannot be read" sentence beside the error's own way out.
  expect(gc.stderr).not.toContain('cannot be read');
  // A plain build that writes (the second model's entries are not in the copy) commits, then refuses to compact at its close.
  const plain = await runCli(['build', second, '--out', cacheDir, '--jobs', '0']);
  expect(plain.code).toBe(1);
  expect(plain.stderr).toContain('writers refuse to compact over it');
  expect(plain.stderr).not.toContain('cannot be read');

  const { json: repaired } = await runJson<BuildJson>(['build', first, '--out', cacheDir, '--jobs', '0', '--repair']);
  // The newer journal's commit, and the plain build's entries from the copy's own journal.
  expect(repaired.manifest_recovered).toMatchObject({ journalEntries: 1, otherJournalEntries: 1, reason: expect.stringMatching(/an older copy put back/) });
  const after = await openCacheStore(cacheDir);
  try {
    expect(after.getEntry(key)).toBeDefined();
  } finally {
    await after.close();
  }
  expect((await runCli(['gc', cacheDir])).code).toBe(0);
  const { json: ok } = await runJson<VerifyJson>(['verify', cacheDir, '--model', first]);
  expect(ok.store.problems).toEqual([]);
});
