// verify --model sizes its blob buffer from the entries of the model's own tensors: an entry of
// another model, or a damaged manifest's, that claims a huge payload (here 19.6 GB, no blob) is a
// problem of the cache check, and the model check still reports every tensor. It used to size one
// buffer from the largest entry of the whole cache and die with a bare RangeError.
import { join } from 'node:path';
import { addOversizedManifestEntry } from '@splitzip/test-support/fixtures';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-verify-damaged-');
});
afterAll(async () => temp?.cleanup());

it('verify --model reports every tensor when another entry claims a payload no buffer can hold', async () => {
  const modelPath = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('a', [64, 64], 31), gaussianBf16('b', [100, 7], 32)]);
  const cacheDir = join(temp.path, 'cache');
  const { json: build } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
  expect(build.encoded).toBe(2);

  await addOversizedManifestEntry(cacheDir);

  const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--no-decode'], 1);
  expect(json.ok).toBe(false);
  expect(json.model!.tensors.map((t) => [t.name, t.status])).toEqual([
    ['a', 'ok'],
    ['b', 'ok'],
  ]);
});
