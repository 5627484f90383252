// A BF16 tensor above MAX_CACHED_TENSOR_BYTES (one payload's values, and on Node 20 the 4 GiB one
// typed array holds) is skipped as too large by build, stats and verify --model alike: it used to
// crash all three with a bare RangeError from a buffer sized to the largest tensor. The file is
// sparse, so it takes no disk space and its bytes are never read.
import { open } from 'node:fs/promises';
import { join } from 'node:path';
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

/** A safetensors file of BF16 tensors whose data is a hole (zeros, no disk blocks). */
async function writeSparseModel(path: string, tensors: Array<[string, number]>): Promise<void> {
  const header: Record<string, unknown> = {};
  let offsetBytes = 0;
  for (const [name, values] of tensors) {
    header[name] = { dtype: 'BF16', shape: [values], data_offsets: [offsetBytes, offsetBytes + 2 * values] };
    offsetBytes += 2 * values;
  }
  const json = Buffer.from(JSON.stringify(header).padEnd(Math.ceil(JSON.stringify(header).length / 8) * 8));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const handle = await open(path, 'w');
  try {
    await handle.write(Buffer.concat([length, json]));
    await handle.truncate(8 + json.length + offsetBytes);
  } finally {
    await handle.close();
  }
}

it('build, stats and verify --model skip a tensor above MAX_CACHED_TENSOR_BYTES as too large', async () => {
  const hugeValues = MAX_CACHED_TENSOR_BYTES / 2 + 1024; // a whole number: MAX_CACHED_TENSOR_BYTES is even
  const modelPath = join(temp.path, 'huge.safetensors');
  await writeSparseModel(modelPath, [['small', 2048], ['huge', hugeValues]]);
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
