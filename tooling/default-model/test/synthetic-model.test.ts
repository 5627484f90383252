import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iterateTensors, openSafetensorsModel } from '@splitzip/safetensors';
import { generateSyntheticModel, inverseNormalCdf, planSyntheticModel } from '../src/index.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'splitzip-synth-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Share of values whose exponent is among the 16 most frequent (the codec's coverage). */
function top16Coverage(bytes: Uint8Array): number {
  const counts = new Uint32Array(256);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.length / 2;
  for (let i = 0; i < n; i++) counts[(view.getUint16(i * 2, true) >>> 7) & 0xff]! += 1;
  return Array.from(counts).sort((a, b) => b - a).slice(0, 16).reduce((s, c) => s + c, 0) / n;
}

async function fileDigests(paths: string[]): Promise<string[]> {
  return Promise.all(paths.map(async (p) => createHash('sha256').update(await readFile(p)).digest('hex')));
}

describe('synthetic model generator', () => {
  it('inverse normal CDF is accurate', () => {
    expect(inverseNormalCdf(0.5)).toBeCloseTo(0, 12);
    expect(inverseNormalCdf(0.975)).toBeCloseTo(1.959963985, 7);
    expect(inverseNormalCdf(0.01)).toBeCloseTo(-2.326347874, 7);
    expect(inverseNormalCdf(1e-5)).toBeCloseTo(-4.264890794, 6);
    expect(inverseNormalCdf(0.3)).toBeCloseTo(-inverseNormalCdf(0.7), 9);
  });

  it('plans a realistic mix that scales with totalBytes', () => {
    for (const totalBytes of [1 << 20, 64 << 20, 1 << 30]) {
      const plan = planSyntheticModel(totalBytes, 1);
      const bytes = plan.reduce((n, t) => n + t.shape.reduce((a, d) => a * d, 1) * (t.dtype === 'BF16' ? 2 : t.dtype === 'F32' ? 4 : 8), 0);
      expect(bytes).toBeLessThanOrEqual(totalBytes * 1.05);
      expect(bytes).toBeGreaterThan(totalBytes * 0.6);
      const kinds = new Set(plan.map((t) => t.kind));
      for (const kind of ['gaussian', 'layernorm', 'outliers', 'escape-heavy', 'duplicate', 'f32', 'i64']) expect(kinds.has(kind as never)).toBe(true);
      expect(new Set(plan.map((t) => t.name)).size).toBe(plan.length);
    }
  });

  it('writes a deterministic sharded model with every kind of tensor behaving as described', async () => {
    const options = { totalBytes: 3 << 20, seed: 7, shardBytes: 1 << 20 };
    const a = await generateSyntheticModel(join(dir, 'a'), options);
    const b = await generateSyntheticModel(join(dir, 'b'), options);
    const c = await generateSyntheticModel(join(dir, 'c'), { ...options, seed: 8 });
    expect(a.shardPaths.length).toBeGreaterThanOrEqual(2);
    expect(await fileDigests(a.shardPaths)).toEqual(await fileDigests(b.shardPaths));
    expect((await fileDigests(c.shardPaths))[0]).not.toBe((await fileDigests(a.shardPaths))[0]);

    const model = await openSafetensorsModel(a.indexPath);
    try {
      expect(model.tensors.map((t) => t.name)).toEqual(a.tensors.map((t) => t.name));
      const byName = new Map(a.tensors.map((t) => [t.name, t]));
      const digests = new Map<string, string>();
      for await (const { tensor, bytes } of iterateTensors(model)) {
        const info = byName.get(tensor.name)!;
        expect(tensor.dtype).toBe(info.dtype);
        digests.set(tensor.name, createHash('sha1').update(bytes).digest('hex'));
        if (info.dtype !== 'BF16') continue;
        const coverage = top16Coverage(bytes);
        if (info.kind === 'escape-heavy') expect(coverage, tensor.name).toBeLessThan(0.99);
        else expect(coverage, tensor.name).toBeGreaterThanOrEqual(0.99);
        const values = new Float32Array(bytes.length / 2);
        const bits = new Uint32Array(values.buffer);
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        for (let i = 0; i < values.length; i++) bits[i] = view.getUint16(i * 2, true) << 16;
        expect(values.every((v) => Number.isFinite(v))).toBe(true);
        const mean = values.reduce((s, v) => s + v, 0) / values.length;
        const std = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length);
        if (info.kind === 'gaussian' && values.length > 10_000) {
          expect(Math.abs(mean)).toBeLessThan(info.sigma! * 0.05);
          expect(std / info.sigma!).toBeGreaterThan(0.97);
          expect(std / info.sigma!).toBeLessThan(1.03);
        }
        if (info.kind === 'layernorm') expect(Math.abs(mean - 1)).toBeLessThan(0.2);
        if (info.kind === 'outliers') expect(Math.max(...values.map(Math.abs))).toBeGreaterThan(15 * info.sigma!);
      }
      const duplicate = a.tensors.find((t) => t.kind === 'duplicate')!;
      expect(digests.get(duplicate.name)).toBe(digests.get(duplicate.duplicateOf!));
    } finally {
      await model.close();
    }

    // reuseIfPresent: the same options find the model; other options regenerate.
    const again = await generateSyntheticModel(join(dir, 'a'), { ...options, reuseIfPresent: true });
    expect(again.reused).toBe(true);
    expect(again.shardPaths).toEqual(a.shardPaths);
    const other = await generateSyntheticModel(join(dir, 'a'), { ...options, seed: 9, reuseIfPresent: true });
    expect(other.reused).toBe(false);
  });
});
