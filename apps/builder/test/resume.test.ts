// A build SIGKILLed mid-way leaves a valid cache; the next run does only what is missing.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import type { BuildJson, InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, collect, runJson, startCli } from './helpers/run-cli.js';
import { waitForBlobs } from './helpers/wait.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

// Enough that the last kill (at 25 blobs) lands with most of the build still to do: with 40, the
// remaining 15 small tensors sometimes all committed within the kill's few milliseconds (2 of 8
// runs after the build got faster, 2026-12-03), and the test saw nothing left to resume.
const TENSORS = 64;

describe('resume after SIGKILL', () => {
  it('survives kills at several points and finishes exactly the missing entries', async () => {
    const tensors = Array.from({ length: TENSORS }, (_, i) => gaussianBf16(`model.layers.${i}.weight`, [256, 257 + i], 1000 + i));
    const { indexPath } = await writeShardedTestModel(join(temp.path, 'model'), tensors, 1_500_000);
    const cacheDir = join(temp.path, 'cache');

    let committed = 0;
    // Kill once a few blobs exist, then later again; jobs alternate so both paths are killed.
    for (const [blobTarget, jobs] of [
      [2, '2'],
      [12, '1'],
      [25, '0'],
    ] as const) {
      const child = startCli(['build', indexPath, '--out', cacheDir, '--jobs', jobs, '--inline-max-mib', '0', '--quiet']);
      const result = collect(child, 60_000);
      await waitForBlobs(cacheDir, blobTarget, 30_000).catch(() => undefined);
      child.kill('SIGKILL');
      const { signal, code } = await result;
      expect(signal === 'SIGKILL' || code === 0).toBe(true);

      // The cache opens and every entry it lists verifies.
      const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir]);
      expect(verify.ok).toBe(true);
      const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
      expect(inspect.totals.entries).toBeGreaterThanOrEqual(committed);
      expect(inspect.totals.entries).toBeLessThanOrEqual(TENSORS);
      committed = inspect.totals.entries;
      // Every committed entry has its slice (added in the same commit).
      expect(inspect.totals.slices).toBe(committed);
    }
    expect(committed).toBeLessThan(TENSORS);

    const { json: finish } = await runJson<BuildJson>(['build', indexPath, '--out', cacheDir]);
    expect(finish.encoded).toBe(TENSORS - committed);
    expect(finish.cached).toBe(committed);
    const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', indexPath]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals.ok).toBe(TENSORS);
  });
});
