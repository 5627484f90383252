// What build, verify and stats print at the edges a probe with hub-shaped models found: a coverage
// just under the gate (printed as the gate itself), a model with no BF16 tensor (an empty cache,
// silently), and a verify gate under the cache's (tensors no build stores called "missing: run build").
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, float32Tensor, int64Tensor, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-gate-dtype-');
});
afterAll(async () => temp?.cleanup());

/**
 * 2,500,000 BF16 values whose Top-16 exponents cover 1 - 25,001/2,500,000 = 0.9899996 of them: under
 * the 0.99 gate by 4e-7, which 6 decimals rounded to nearest print as 0.990000.
 */
function justUnderGate(name: string): TensorData {
  const count = 2_500_000;
  const escapes = 25_001;
  const values = new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    // Escapes spread over 90 rare exponents (1..90), the rest over 16 common ones (100..115).
    const exponent = i < escapes ? 1 + (i % 90) : 100 + (i % 16);
    values[i] = (exponent << 7) | (i & 0x7f);
  }
  return { name, dtype: 'BF16', shape: [count], data: new Uint8Array(values.buffer) };
}

describe('a coverage just under the gate never prints as the gate', () => {
  it('verify --model, stats and build round it down', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'edge.safetensors'), [justUnderGate('edge.weight')]);
    const cacheDir = join(temp.path, 'cache-edge');
    const build = await run(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    expect(build.code).toBe(0);
    expect(build.out).toMatch(/edge\.weight\s+BF16\s+\[2500000\]\s+\S+ \S+\s+skipped_coverage\s+98\.99%/);
    const verify = await run(['verify', cacheDir, '--model', modelPath, '--quiet']);
    expect(verify.code).toBe(0);
    expect(verify.out).toMatch(/edge\.weight\s+Top-16 coverage 0\.989999 < 0\.99/);
    const stats = await run(['stats', modelPath, '--quiet']);
    expect(stats.out).toMatch(/edge\.weight .* 98\.999% .* skip: coverage/);
  }, 60_000);
});

describe('a model with no BF16 tensor', () => {
  it('build says SplitZip stores BF16 tensors only and none were found (exit 0, JSON as before)', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'fp32.safetensors'), [float32Tensor('a.weight', [64, 64], 1), float32Tensor('b.weight', [64], 2), int64Tensor('ids', [8])]);
    const cacheDir = join(temp.path, 'cache-fp32');
    const text = await run(['build', modelPath, '--out', cacheDir, '--quiet']);
    expect(text.code).toBe(0);
    // Lines past 120 columns go on under their value (8 columns in).
    expect(text.out.replace(/\n {8}/g, ' ')).toContain('note    SplitZip stores BF16 tensors only, and this model has none (2 F32, 1 I64): nothing was cached, every tensor is served raw');
    const json = await run(['build', modelPath, '--out', cacheDir, '--json']);
    expect(json.code).toBe(0);
    expect(json.out).not.toContain('SplitZip stores');
    expect(JSON.parse(json.out)).toMatchObject({ encoded: 0, skipped_dtype: 3 });
  });
});

describe('verify --coverage-min under the cache gate', () => {
  it('is a usage error naming the cache gate (no build into the cache stores the tensors between the two)', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'low.safetensors'), [justUnderGate('edge.weight')]);
    const cacheDir = join(temp.path, 'cache-low');
    expect((await run(['build', modelPath, '--out', cacheDir, '--jobs', '0', '--quiet'])).code).toBe(0);
    const low = await run(['verify', cacheDir, '--model', modelPath, '--coverage-min', '0.98', '--quiet']);
    expect(low.code).toBe(2);
    expect(low.out).toBe('');
    expect(low.err).toContain("option '--coverage-min' 0.98 is below the cache's gate: the cache gates at 0.99");
    // At or above the gate: judged by it as before.
    expect((await run(['verify', cacheDir, '--model', modelPath, '--coverage-min', '0.99', '--quiet'])).code).toBe(0);
    expect((await run(['verify', cacheDir, '--model', modelPath, '--coverage-min', '0.995', '--quiet'])).code).toBe(0);
  }, 60_000);
});
