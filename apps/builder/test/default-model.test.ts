// build -> verify -> inspect -> stats on the built-in default model (real weights, 3 shards).
import { join } from 'node:path';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from './helpers/models.js';
import type { BuildJson, InspectJson, StatsJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runJson } from './helpers/run-cli.js';

let temp: TempDir;
let indexPath: string;
let tensorCount: number;
let bf16Count: number;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  const dir = await ensureDefaultModel({ outDir: join(temp.path, 'default-model') });
  indexPath = join(dir, 'model.safetensors.index.json');
  const model = await openSafetensorsModel(indexPath);
  tensorCount = model.tensors.length;
  bf16Count = model.tensors.filter((t) => t.dtype === 'BF16').length;
  expect(model.shards.length).toBeGreaterThanOrEqual(2);
  await model.close();
});
afterAll(async () => temp?.cleanup());

describe('the default model', () => {
  it('builds, verifies bit-exactly against the files, inspects and predicts', async () => {
    const cacheDir = join(temp.path, 'cache');
    const { json: build } = await runJson<BuildJson>(['build', indexPath, '--out', cacheDir]);
    expect(build.tensors).toHaveLength(tensorCount);
    expect(build.skipped_dtype).toBe(tensorCount - bf16Count);
    expect(build.encoded + build.cached + build.skipped_coverage).toBe(bf16Count);
    // Real weights: most BF16 tensors pass the gate and compress to ~3/4; a few real tensors escape.
    // Its norms, biases and scalars would not shrink, but a default build encodes them all the same
    // (only build --skip-no-gain skips them): a cacheOnly load of the model finds every one.
    expect(build.skipped_no_gain).toBe(0);
    expect(build.encoded).toBeGreaterThan(bf16Count / 2);
    expect(build.ratio!).toBeGreaterThan(0.7);
    expect(build.ratio!).toBeLessThan(0.8);
    expect(new Set(build.tensors.map((t) => t.shard)).size).toBeGreaterThanOrEqual(2);

    const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', indexPath]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals).toMatchObject({ tensors: tensorCount, ok: build.encoded + build.cached, failed: 0 });
    expect(verify.model!.totals.not_cached).toBe(build.skipped_coverage + build.skipped_dtype);

    const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
    expect(inspect.totals.entries).toBe(build.encoded);
    expect(inspect.totals.rawBytes).toBe(build.tensors.filter((t) => t.status === 'encoded').reduce((s, t) => s + t.sizeBytes, 0));

    const { json: stats } = await runJson<StatsJson>(['stats', indexPath]);
    expect(stats.totals.tensors).toBe(tensorCount);
    expect(stats.totals.predictedBytes).toBe(build.comp_bytes);

    const { json: again } = await runJson<BuildJson>(['build', indexPath, '--out', cacheDir, '--jobs', '0']);
    expect(again.encoded).toBe(0);
    expect(again.cached).toBe(build.encoded + build.cached);
  });
});
