// A cache's own settings (its gate and chunk size) against a later build's flags, and empty tensors
// that share one file offset: through the real binary.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { createTempDir, escapeHeavyBf16, float32Tensor, gaussianBf16, outlierBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { snapshotDir, type BuildJson, type InspectJson, type VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir('splitzip-settings-');
});
afterAll(async () => temp?.cleanup());

/** BF16 values whose Top-16 coverage is about 0.95: below the default gate, above 0.9. */
function midCoverageBf16(name: string, n: number): TensorData {
  const values = new Uint16Array(n);
  // 16 exponents for 95% of the values, then 5% spread over 32 others.
  for (let i = 0; i < n; i++) {
    const exponent = i % 20 === 0 ? 20 + (i % 32) : 100 + (i % 16);
    values[i] = (exponent << 7) | (i & 0x7f);
  }
  return { name, dtype: 'BF16', shape: [n], data: new Uint8Array(values.buffer) };
}

describe('a cache keeps the gate and chunk size it was created with', () => {
  let firstModel: string;
  let secondModel: string;
  let cacheDir: string;

  beforeAll(async () => {
    firstModel = await writeSingleFileModel(join(temp.path, 'first.safetensors'), [gaussianBf16('w', [64, 33], 1)]);
    secondModel = await writeSingleFileModel(join(temp.path, 'second.safetensors'), [
      gaussianBf16('w2', [3000], 2),
      midCoverageBf16('mid', 4000),
      escapeHeavyBf16('noise', [2000], 3),
    ]);
    cacheDir = join(temp.path, 'cache-0.9');
    await runJson<BuildJson>(['build', firstModel, '--out', cacheDir, '--coverage-min', '0.9', '--chunk-size', '256', '--jobs', '0']);
  });

  it('a later build without the flags uses them: the tensor between 0.9 and 0.99 is encoded, at the cache chunk size', async () => {
    const { json } = await runJson<BuildJson>(['build', secondModel, '--out', cacheDir, '--jobs', '0']);
    expect(json.coverage_min).toBe(0.9);
    expect(json.chunk_size).toBe(256);
    expect(json.tensors.find((t) => t.name === 'mid')).toMatchObject({ status: 'encoded' });
    expect(json.tensors.find((t) => t.name === 'noise')).toMatchObject({ status: 'skipped_coverage' });
    const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
    for (const entry of inspect.entries) expect(entry.chunkSize, entry.qualname).toBe(256);
    // verify --model judges by the same gate: nothing reads as missing.
    const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', secondModel]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals).toMatchObject({ ok: 2, not_cached: 1, failed: 0 });
  });

  it('refuses another gate than the cache one, writing nothing, and says how to go on', async () => {
    const before = await snapshotDir(cacheDir);
    const result = await runCli(['build', secondModel, '--out', cacheDir, '--coverage-min', '0.99']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/gates at coverage 0\.9, this build asks 0\.99: leave out --coverage-min/);
    expect(await snapshotDir(cacheDir)).toEqual(before);
  });

  it('takes the same gate when it is given, and another chunk size for the tensors it encodes', async () => {
    const third = await writeSingleFileModel(join(temp.path, 'third.safetensors'), [outlierBf16('o', [5000], 4)]);
    const { json } = await runJson<BuildJson>(['build', third, '--out', cacheDir, '--coverage-min', '0.9', '--chunk-size', '1024', '--jobs', '0']);
    expect(json).toMatchObject({ coverage_min: 0.9, chunk_size: 1024, encoded: 1 });
    const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
    expect(inspect.entries.find((e) => e.qualname === 'o')?.chunkSize).toBe(1024);
    expect((await runJson<VerifyJson>(['verify', cacheDir])).json.ok).toBe(true);
  });
});

describe('empty tensors sharing one offset', () => {
  const empty = (name: string, dtype: 'BF16' | 'F32', shape: number[]): TensorData => ({ name, dtype, shape, data: new Uint8Array(0) });

  it.each([
    ['two BF16 of different shapes', [empty('z1', 'BF16', [0]), empty('z2', 'BF16', [0, 5]), gaussianBf16('a', [300], 5)]],
    ['an F32 and a BF16', [empty('f', 'F32', [0]), empty('z', 'BF16', [2, 0]), float32Tensor('g', [7], 6)]],
  ] as const)('%s: build, re-run and verify --model pass, with every job count', async (_label, tensors) => {
    const modelPath = await writeSingleFileModel(join(temp.path, `empty-${tensors[0]!.name}.safetensors`), [...tensors]);
    const model = await openSafetensorsModel(modelPath);
    const offsets = model.tensors.filter((t) => t.slice.sizeBytes === 0).map((t) => t.slice.offsetBytes);
    await model.close();
    // The premise: the writer put both empty tensors at one offset.
    expect(new Set(offsets).size).toBe(1);
    for (const jobs of ['0', '2']) {
      const cacheDir = join(temp.path, `cache-empty-${tensors[0]!.name}-${jobs}`);
      const { json } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', jobs, '--inline-max-mib', '0']);
      expect(json.tensors.every((t) => t.status !== 'skipped_coverage')).toBe(true);
      const again = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', jobs]);
      expect(again.json.encoded).toBe(0);
      const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
      expect(verify.model!.totals.failed).toBe(0);
      expect(verify.ok).toBe(true);
    }
  });
});
