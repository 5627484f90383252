// A cache whose blobs/ directory is gone: verify names `build --repair`, which must then put every
// blob back (it failed `IO_ERROR: cannot write the blob [ENOENT]` for good), through the real binary.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-missing-blobs-');
});
afterAll(async () => temp?.cleanup());

it('blobs/ removed: verify says what is missing and names --repair, which puts every blob back', async () => {
  const model = await writeSingleFileModel(join(temp.path, 'model.safetensors'), [gaussianBf16('a', [300, 7], 41), gaussianBf16('b', [2050], 42)]);
  const cacheDir = join(temp.path, 'cache');
  await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0']);
  await rm(join(cacheDir, 'blobs'), { recursive: true });
  const { json: broken } = await runJson<VerifyJson>(['verify', cacheDir, '--model', model], 1);
  expect(broken.store.problems.map((p) => p.code)).toEqual(['BLOB_MISSING', 'BLOB_MISSING']);
  expect((await runCli(['verify', cacheDir])).stdout).toContain('--repair');
  const { json: repaired } = await runJson<BuildJson>(['build', model, '--out', cacheDir, '--jobs', '0', '--repair']);
  expect(repaired).toMatchObject({ cached: 2, repaired: 2 });
  const { json: ok } = await runJson<VerifyJson>(['verify', cacheDir, '--model', model]);
  expect(ok.store.problems).toEqual([]);
  expect(ok.model?.totals.ok).toBe(2);
});
