// A cache whose journal header is damaged (a flipped byte, a truncated file) could not be opened at
// all, so verify, gc and build --repair all failed and only removing the journal by hand helped.
// Now verify reports it with the way out, a plain build refuses (also one with nothing to write), and build
// --repair sets it aside (kept) and builds on, through the real binary.
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-journal-repair-');
});
afterAll(async () => temp?.cleanup());

it('a damaged journal header: verify says so and how to recover, build refuses, build --repair sets it aside and builds', async () => {
  const first = [gaussianBf16('a', [300, 7], 11), gaussianBf16('b', [2050], 12)];
  const cacheDir = join(temp.path, 'cache');
  const firstModel = await writeSingleFileModel(join(temp.path, 'first.safetensors'), first);
  await runJson<BuildJson>(['build', firstModel, '--out', cacheDir, '--jobs', '0']);
  const journal = (await readdir(cacheDir)).find((name) => /^journal\.\d+$/.test(name))!;
  const bytes = await readFile(join(cacheDir, journal));
  bytes[3]! ^= 0x40; // the magic
  await writeFile(join(cacheDir, journal), bytes);

  const { json: verified } = await runJson<VerifyJson>(['verify', cacheDir], 1);
  expect(verified.store.problems.map((p) => p.code)).toEqual(['JOURNAL_INVALID']);
  const text = await runCli(['verify', cacheDir]);
  expect(text.stdout).toContain(`\`splitzip build <model> --out ${cacheDir} --repair\` sets it aside`);

  // A build with nothing to write (the same model) refuses too: it exited 0, over records its loads never see.
  const same = await runCli(['build', firstModel, '--out', cacheDir, '--jobs', '0']);
  expect(same.code).toBe(1);
  expect(same.stderr).toContain('JOURNAL_INVALID');
  expect(same.stderr).toContain('splitzip build --repair');

  const second = [...first, gaussianBf16('c', [2000], 13)];
  const secondModel = await writeSingleFileModel(join(temp.path, 'second.safetensors'), second);
  const refused = await runCli(['build', secondModel, '--out', cacheDir, '--jobs', '0']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('JOURNAL_INVALID');

  const { json: repaired } = await runJson<BuildJson>(['build', secondModel, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(repaired.journal_recovered).toMatchObject({ damagedFromOffsetBytes: 0 });
  expect(repaired.journal_recovered!.keptAs).toMatch(/journal\.\d+\.damaged-\d+$/);
  // String(): the store's JournalRecovery.keptAs may be null (a missing journal: nothing kept); here it is the path just matched.
  expect(Buffer.from(await readFile(String(repaired.journal_recovered!.keptAs))).equals(bytes)).toBe(true);
  expect(repaired.encoded + repaired.cached).toBe(3);
  const { json: ok } = await runJson<VerifyJson>(['verify', cacheDir, '--model', secondModel]);
  expect(ok.store.problems).toEqual([]);
  expect(ok.model?.totals.ok).toBe(3);
  // A second --repair finds nothing to recover.
  const { json: again } = await runJson<BuildJson>(['build', secondModel, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(again.journal_recovered).toBeNull();
});

it('a missing journal: verify reports it, build refuses, build --repair moves the cache on and says the journal was missing', async () => {
  const tensors = [gaussianBf16('a', [300, 7], 21), gaussianBf16('b', [2050], 22)];
  const cacheDir = join(temp.path, 'cache-missing');
  const model = await writeSingleFileModel(join(temp.path, 'missing.safetensors'), tensors);
  await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0']);
  const journal = (await readdir(cacheDir)).find((name) => /^journal\.\d+$/.test(name))!;
  await rm(join(cacheDir, journal));

  const { json: verified } = await runJson<VerifyJson>(['verify', cacheDir], 1);
  expect(verified.store.problems.map((p) => p.code)).toEqual(['JOURNAL_INVALID']);
  // A build with something to write (a model with one more tensor) refuses to write past it.
  const more = await writeSingleFileModel(join(temp.path, 'missing-more.safetensors'), [...tensors, gaussianBf16('c', [2000], 23)]);
  const refused = await runCli(['build', more, '--out', cacheDir, '--jobs', '0']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('is missing');
  // And one with nothing to write (the model built).
  const same = await runCli(['build', model, '--out', cacheDir, '--jobs', '0']);
  expect(same.code).toBe(1);
  expect(same.stderr).toContain('is missing');
  const repaired = await runCli(['build', more, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(repaired.code).toBe(0);
  expect(repaired.stdout).toContain('journal missing: the cache moved to a new generation from its manifest');
  const { json: ok } = await runJson<VerifyJson>(['verify', cacheDir, '--model', more]);
  expect(ok.store.problems).toEqual([]);
  expect(ok.model?.totals.ok).toBe(3);
});
