// A BF16 tensor above MAX_CACHED_TENSOR_BYTES (one payload's values, and on Node 20 the 4 GiB one
// typed array holds) is skipped as too large by build, stats and verify --model alike: it used to
// crash all three with a bare RangeError from a buffer sized to the largest tensor. The file is
// sparse, so it takes no disk space and its bytes are never read.
import { join } from 'node:path';
import { writeSparseSafetensors } from '@splitzip/test-support/fixtures';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_CACHED_TENSOR_BYTES } from '../src/limits.js';
import { createTempDir, type TempDir } from './helpers/models.js';
import type { BuildJson, StatsJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-too-large-');
});
afterAll(async () => temp?.cleanup());

it('build, stats and verify --model skip a tensor above MAX_CACHED_TENSOR_BYTES as too large', async () => {
  const hugeValues = MAX_CACHED_TENSOR_BYTES / 2 + 1024; // a whole number: MAX_CACHED_TENSOR_BYTES is even
  const modelPath = join(temp.path, 'huge.safetensors');
  await writeSparseSafetensors(modelPath, [['small', 2048], ['huge', hugeValues]]);
  const cacheDir = join(temp.path, 'cache');

  const { json: build } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
  expect(build).toMatchObject({ encoded: 1, skipped_size: 1 });
  expect(build.tensors.find((t) => t.name === 'huge')).toMatchObject({ status: 'skipped_size', key: null });

  const { json: stats } = await runJson<StatsJson>(['stats', modelPath]);
  expect(stats.totals).toMatchObject({ tensors: 2, bf16Tensors: 1, tooLargeTensors: 1, encodableTensors: 1 });

  const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
  expect(verify.ok).toBe(true);
  expect(verify.model!.tensors.find((t) => t.name === 'huge')).toMatchObject({ status: 'not_cached', reason: expect.stringMatching(/^more than \d+ bytes/) });
});
