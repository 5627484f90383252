// Small generated models for the end-to-end tests, written with the safetensors package's own
// writers into temp dirs. Deterministic (seeded PRNG) so failures reproduce.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeSafetensorsFile, writeShardedModel, type SafetensorsDtype } from '@splitzip/safetensors';
import { createRandom, toBf16 } from '@splitzip/test-support/random';

export interface TensorData {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  data: Uint8Array;
}

export { createRandom, toBf16 };

function elementCount(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

/** Gaussian weights (std `scale`): exponents concentrate, so Top-16 coverage is ~0.999+. */
export function gaussianBf16(name: string, shape: number[], seed: number, scale = 0.02): TensorData {
  const random = createRandom(seed);
  const n = elementCount(shape);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(random(), 1e-12);
    const v = random();
    values[i] = toBf16(scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  }
  return { name, dtype: 'BF16', shape, data: new Uint8Array(values.buffer) };
}

/** Uniformly random bit patterns: ~256 distinct exponents, coverage ~1/16, fails any sane gate. */
export function escapeHeavyBf16(name: string, shape: number[], seed: number): TensorData {
  const random = createRandom(seed);
  const n = elementCount(shape);
  const values = new Uint16Array(n);
  for (let i = 0; i < n; i++) values[i] = Math.floor(random() * 65536);
  return { name, dtype: 'BF16', shape, data: new Uint8Array(values.buffer) };
}

/** Gaussian weights plus a share of wide-range outliers: passes a 0.99 gate with real escapes. */
export function outlierBf16(name: string, shape: number[], seed: number, outlierShare = 0.004): TensorData {
  const tensor = gaussianBf16(name, shape, seed);
  const random = createRandom(seed ^ 0x5bd1e995);
  const values = new Uint16Array(tensor.data.buffer);
  for (let i = 0; i < values.length; i++) {
    if (random() < outlierShare) values[i] = toBf16((random() - 0.5) * 2 ** Math.floor(random() * 60 - 30));
  }
  return tensor;
}

export function float32Tensor(name: string, shape: number[], seed: number): TensorData {
  const random = createRandom(seed);
  const values = new Float32Array(elementCount(shape));
  for (let i = 0; i < values.length; i++) values[i] = random() - 0.5;
  return { name, dtype: 'F32', shape, data: new Uint8Array(values.buffer) };
}

export function int64Tensor(name: string, shape: number[]): TensorData {
  const values = new BigInt64Array(elementCount(shape));
  for (let i = 0; i < values.length; i++) values[i] = BigInt(i);
  return { name, dtype: 'I64', shape, data: new Uint8Array(values.buffer) };
}

export function copyTensor(name: string, source: TensorData): TensorData {
  return { ...source, name, shape: [...source.shape], data: source.data.slice() };
}

export interface TempDir {
  path: string;
  cleanup(): Promise<void>;
}

export async function createTempDir(prefix = 'splitzip-builder-'): Promise<TempDir> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, cleanup: () => rm(path, { recursive: true, force: true }) };
}

export async function writeSingleFileModel(path: string, tensors: TensorData[]): Promise<string> {
  await writeSafetensorsFile(path, tensors, { format: 'pt' });
  return path;
}

/** A sharded model with an index; returns the index path. */
export async function writeShardedTestModel(dir: string, tensors: TensorData[], maxShardBytes: number, shardNamePrefix = 'model'): Promise<{ indexPath: string; shardPaths: string[] }> {
  return writeShardedModel(dir, tensors, { maxShardBytes, shardMetadata: { format: 'pt' }, shardNamePrefix });
}

/**
 * The mixed model most tests use: Gaussian weights of odd sizes, an outlier tensor, an escape-heavy
 * tensor (fails the gate), F32 and I64 tensors (skipped: dtype), an exact duplicate, an empty BF16
 * tensor, a 1-value tensor.
 */
export function mixedTensors(seed = 1): TensorData[] {
  const embed = gaussianBf16('model.embed_tokens.weight', [257, 96], seed);
  return [
    embed,
    gaussianBf16('model.layers.0.self_attn.q_proj.weight', [96, 96], seed + 1),
    gaussianBf16('model.layers.0.self_attn.k_proj.weight', [31, 96], seed + 2),
    outlierBf16('model.layers.0.mlp.up_proj.weight', [333, 97], seed + 3),
    escapeHeavyBf16('model.layers.0.mlp.router.weight', [17, 129], seed + 4),
    float32Tensor('model.layers.0.input_layernorm.weight', [96], seed + 5),
    int64Tensor('model.position_ids', [1, 64]),
    gaussianBf16('model.layers.1.self_attn.q_proj.weight', [96, 96], seed + 6),
    gaussianBf16('model.empty.weight', [0, 96], seed + 7),
    gaussianBf16('model.scalar', [1], seed + 8),
    copyTensor('lm_head.weight', embed),
  ];
}
