// The CommonJS build under a path that needs escaping in a file: URL (#, %41, a space).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyBuildToOddPath, type OddPathCopy } from '@splitzip/test-support/odd-path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as Builder from '../src/index.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt } from './helpers/run-cli.js';

let copy: OddPathCopy;
let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  copy = copyBuildToOddPath(fileURLToPath(new URL('..', import.meta.url)));
  temp = await createTempDir();
});
afterAll(async () => {
  copy?.remove();
  await temp?.cleanup();
});

describe('the CommonJS build in a directory named "splitzip #1 %41-…"', () => {
  it('builds with worker threads (their script was looked for under the path cut at "#": TENSOR_FAILED)', { timeout: 60_000 }, async () => {
    const { buildCache } = copy.requireFromCopy('./dist/index.cjs') as typeof Builder;
    const tensors = [0, 1, 2].map((i) => gaussianBf16(`layers.${i}.weight`, [64, 129 + i], 40 + i));
    const model = await writeSingleFileModel(join(temp.path, 'model.safetensors'), tensors);
    // jobs 2 and no inline tensors: every tensor goes through the calibration/hash workers.
    const report = await buildCache({ model, cacheDir: join(temp.path, 'cache'), jobs: 2, inlineMaxBytes: 0 });
    expect(report.encoded).toBe(3);
  });
});
