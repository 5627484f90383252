// A damaged manifest.json (a flipped bit fails its checksum) made every command refuse the cache,
// and the way out was to remove it and build every model again. build --repair now salvages it
// through the real binary: the entries that still decode to their content keys are kept (a second
// model sharing the cache is not encoded again), the bindings are made again per model.
import { readFile, writeFile } from 'node:fs/promises';
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
  const first = await writeSingleFileModel(join(temp.path, 'first.safetensors'), [shared, gaussianBf16('a', [1025], 32)]);
  const second = await writeSingleFileModel(join(temp.path, 'second.safetensors'), [gaussianBf16('b', [2000], 33), shared, gaussianBf16('c', [64, 9], 34)]);
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
