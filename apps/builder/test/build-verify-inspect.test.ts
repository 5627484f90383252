// build -> verify -> inspect -> stats through the real binary, on generated models that have
// non-BF16 tensors, escape-heavy tensors that fail the gate, duplicates, empty tensors, several shards.
import { cp, readdir, readFile, rename, stat, utimes, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_QUALNAME_CHARS, MAX_SLICE_KEYS_PER_ENTRY, MAX_SLICE_STAMPS, openCacheStore } from '@splitzip/store';
import {
  createTempDir,
  float32Tensor,
  gaussianBf16,
  mixedTensors,
  outlierBf16,
  writeShardedTestModel,
  writeSingleFileModel,
  type TempDir,
  type TensorData,
} from './helpers/models.js';
import { seedContentKey, snapshotDir, type BuildJson, type InspectJson, type StatsJson, type VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

function checkBuildSums(report: BuildJson, tensorCount: number): void {
  expect(report.tensors).toHaveLength(tensorCount);
  const count = (status: string): number => report.tensors.filter((t) => t.status === status).length;
  expect(report.encoded).toBe(count('encoded'));
  expect(report.cached).toBe(count('cached'));
  expect(report.skipped_coverage).toBe(count('skipped_coverage'));
  expect(report.skipped_dtype).toBe(count('skipped_dtype'));
  expect(report.skipped_no_gain).toBe(count('skipped_no_gain'));
  expect(report.encoded + report.cached + report.skipped_coverage + report.skipped_dtype + report.skipped_size + report.skipped_no_gain).toBe(tensorCount);
  const served = report.tensors.filter((t) => t.status === 'encoded' || t.status === 'cached');
  expect(report.comp_bytes).toBe(served.reduce((sum, t) => sum + t.compBytes!, 0));
  expect(report.raw_bytes).toBe(served.reduce((sum, t) => sum + t.sizeBytes, 0));
  if (report.raw_bytes > 0) expect(report.ratio).toBeCloseTo(report.comp_bytes / report.raw_bytes, 12);
  for (const t of report.tensors) {
    if (t.status === 'skipped_dtype') expect(t.dtype).not.toBe('BF16');
    else expect(t.dtype).toBe('BF16');
    if (t.status === 'skipped_coverage') expect(t.coverage!).toBeLessThan(0.99);
    if (t.status === 'encoded' || t.status === 'cached') expect(t.compBytes).toBeGreaterThan(0);
  }
}

describe('a single-file model with every kind of tensor', () => {
  let tensors: TensorData[];
  let modelPath: string;
  let cacheDir: string;
  let first: BuildJson;

  beforeAll(async () => {
    tensors = mixedTensors(11);
    modelPath = await writeSingleFileModel(join(temp.path, 'mixed.safetensors'), tensors);
    cacheDir = join(temp.path, 'cache-mixed');
    // Workers even for this small model (--inline-max-mib 0): the default would build it inline.
    ({ json: first } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '2', '--inline-max-mib', '0']));
  });

  it('builds: skips non-BF16 and the escape-heavy tensor, stores the duplicate once, sums add up', () => {
    checkBuildSums(first, tensors.length);
    const byName = new Map(first.tensors.map((t) => [t.name, t]));
    expect(byName.get('model.layers.0.input_layernorm.weight')!.status).toBe('skipped_dtype');
    expect(byName.get('model.position_ids')!.status).toBe('skipped_dtype');
    expect(byName.get('model.layers.0.mlp.router.weight')!.status).toBe('skipped_coverage');
    expect(byName.get('model.layers.0.mlp.router.weight')!.coverage!).toBeLessThan(0.2);
    expect(first.skipped_dtype).toBe(2);
    expect(first.skipped_coverage).toBe(1);
    // 8 BF16 tensors pass the gate, lm_head is an exact copy of the embedding: 7 entries.
    expect(first.encoded).toBe(7);
    expect(first.cached).toBe(1);
    expect(byName.get('lm_head.weight')!.key).toBe(byName.get('model.embed_tokens.weight')!.key);
    // Every slice but the empty tensor's (a zero-byte slice names no tensor: not aliased).
    expect(first.aliased).toBe(7);
    // Keys are the seed's content keys, computed here independently.
    for (const tensor of tensors) {
      const row = byName.get(tensor.name)!;
      if (tensor.dtype === 'BF16') expect(row.key).toBe(seedContentKey(tensor));
      else expect(row.key).toBeNull();
    }
  });

  it('a local cache records no SHA-256 of the raw bytes (the content key is their digest) nor of the blobs (their XXH32 covers them)', async () => {
    const store = await openCacheStore(cacheDir);
    try {
      const entries = [...store.entries()];
      expect(entries).toHaveLength(7);
      for (const entry of entries) {
        expect(entry.sha256).toBeNull();
        expect(entry.blobSha256).toBeNull();
        expect(entry.blobChecksum).toMatch(/^xxh32:[0-9a-f]{8}$/);
      }
      expect((await store.verify({ decode: true })).ok).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('slices in the report are the file positions of the tensors', async () => {
    const file = await readFile(modelPath);
    const headerBytes = Number(file.readBigUInt64LE(0));
    const header = JSON.parse(file.subarray(8, 8 + headerBytes).toString('utf8')) as Record<string, { data_offsets: [number, number] }>;
    for (const row of first.tensors) {
      const [begin, end] = header[row.name]!.data_offsets;
      expect(row.shard).toBe('mixed.safetensors');
      expect(row.offsetBytes).toBe(8 + headerBytes + begin);
      expect(row.sizeBytes).toBe(end - begin);
    }
  });

  it('verifies against the model: every cached tensor bit-identical, the rest not cached with a reason', async () => {
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(json.ok).toBe(true);
    expect(json.store.ok).toBe(true);
    expect(json.store.checked).toBe(7);
    expect(json.model!.totals).toEqual({ tensors: 11, ok: 8, not_cached: 3, failed: 0, checked_bytes: expect.any(Number) });
    const reasons = json.model!.tensors.filter((t) => t.status === 'not_cached').map((t) => `${t.name}: ${t.reason}`);
    expect(reasons).toEqual([
      expect.stringMatching(/router.weight: Top-16 coverage 0\.\d+ < 0\.99/),
      expect.stringMatching(/input_layernorm.weight: dtype F32 is not BF16/),
      expect.stringMatching(/position_ids: dtype I64 is not BF16/),
    ]);
  });

  it('inspects: one entry per distinct tensor, every slice alias listed, totals add up', async () => {
    const { json } = await runJson<InspectJson>(['inspect', cacheDir]);
    expect(json.entries).toHaveLength(7);
    const built = first.tensors.filter((t) => t.status === 'encoded' || t.status === 'cached');
    for (const row of built) {
      const entry = json.entries.find((e) => e.key === row.key)!;
      if (row.sizeBytes === 0) expect(entry.slices).toEqual([]);
      else expect(entry.slices).toContainEqual([row.shard, row.offsetBytes, row.sizeBytes]);
      expect(entry.rawBytes).toBe(row.sizeBytes);
      expect(entry.compBytes).toBe(row.compBytes);
    }
    const embedEntry = json.entries.find((e) => e.key === seedContentKey(tensors[0]!))!;
    expect(embedEntry.slices).toHaveLength(2);
    expect(json.totals.entries).toBe(7);
    expect(json.totals.slices).toBe(7);
    expect(json.totals.rawBytes).toBe(json.entries.reduce((s, e) => s + e.rawBytes, 0));
    expect(json.totals.compBytes).toBe(json.entries.reduce((s, e) => s + e.compBytes, 0));
    expect(json.totals.escapeCount).toBe(json.entries.reduce((s, e) => s + e.escapeCount, 0));
    // The outlier tensor really has escapes, and they round-tripped (verify passed above).
    expect(json.entries.find((e) => e.qualname === 'model.layers.0.mlp.up_proj.weight')!.escapeCount).toBeGreaterThan(0);
  });

  it('re-running finds every entry and writes nothing', async () => {
    const before = await snapshotDir(cacheDir);
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    checkBuildSums(json, tensors.length);
    expect(json.encoded).toBe(0);
    expect(json.cached).toBe(8);
    expect(json.stored_bytes).toBe(0);
    expect(json.aliased).toBe(0);
    expect(json.comp_bytes).toBe(first.comp_bytes);
    expect(await snapshotDir(cacheDir)).toEqual(before);
  });

  it('stats predicts exactly the payload sizes the build produced, and writes nothing', async () => {
    const before = await snapshotDir(temp.path);
    const { json } = await runJson<StatsJson>(['stats', modelPath]);
    expect(await snapshotDir(temp.path)).toEqual(before);
    expect(json.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
    for (const row of json.tensors) {
      const built = first.tensors.find((t) => t.name === row.name)!;
      expect(row.dtype).toBe(built.dtype);
      expect(row.shape).toEqual(built.shape);
      if (built.status === 'encoded' || built.status === 'cached') {
        expect(row.encodable).toBe(true);
        expect(row.predictedBytes).toBe(built.compBytes);
        expect(row.coverage).toBe(built.coverage);
      } else {
        expect(row.encodable).toBe(false);
      }
    }
    const router = json.tensors.find((t) => t.name.endsWith('router.weight'))!;
    expect(router.distinctExponents).toBeGreaterThan(200);
    expect(router.entropyBits!).toBeGreaterThan(6);
    const q = json.tensors.find((t) => t.name.endsWith('q_proj.weight'))!;
    expect(q.entropyBits!).toBeGreaterThan(1);
    expect(q.entropyBits!).toBeLessThan(4);
    expect(json.totals.tensors).toBe(11);
    expect(json.totals.encodableTensors).toBe(8);
    expect(json.totals.predictedBytes).toBe(first.comp_bytes);
    expect(json.totals.encodableBytes).toBe(first.raw_bytes);
  });

  it('prints readable tables without --json', async () => {
    const build = await runCli(['build', modelPath, '--out', cacheDir]);
    expect(build.code).toBe(0);
    expect(build.stdout).toMatch(/^tensor\s+dtype\s+shape\s+raw\s+status\s+coverage\s+comp\s+ratio/m);
    expect(build.stdout).toMatch(/model\.layers\.0\.mlp\.router\.weight\s+BF16\s+\[17,129\].*skipped_coverage/);
    expect(build.stdout).toContain('tensors 11: 0 encoded, 8 already cached, 1 skipped (coverage < 0.99), 2 skipped (not BF16)');
    expect(build.stderr).toBe('');
    const verify = await runCli(['verify', cacheDir, '--model', modelPath]);
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(/11 tensors, 8 cached and bit-identical, 3 not cached, 0 failed/);
    expect(verify.stdout.trim().endsWith('OK')).toBe(true);
    const inspect = await runCli(['inspect', cacheDir]);
    expect(inspect.stdout).toMatch(/entries 7 \(7 slice keys\)/);
    const stats = await runCli(['stats', modelPath]);
    expect(stats.stdout).toMatch(/tensors\s+11: 9 BF16, 8 pass the 0.99 coverage gate/);
  });

  it('a lower gate encodes the escape-heavy tensor too, bit-exactly', async () => {
    const lowGateCache = join(temp.path, 'cache-low-gate');
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', lowGateCache, '--coverage-min', '0', '--chunk-size', '64', '--jobs', '0']);
    checkBuildSums(json, tensors.length);
    expect(json.skipped_coverage).toBe(0);
    expect(json.encoded).toBe(8);
    const router = json.tensors.find((t) => t.name.endsWith('router.weight'))!;
    // Nearly every value escapes: the payload is larger than the raw tensor.
    expect(router.compBytes!).toBeGreaterThan(router.sizeBytes);
    const { json: verify } = await runJson<VerifyJson>(['verify', lowGateCache, '--model', modelPath, '--coverage-min', '0']);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals.ok).toBe(9);
  });

  it('--jobs 0, 1, 2 and 8 produce the same entries; --jobs 8 runs only the workers that fit the bound', async () => {
    const reports: BuildJson[] = [];
    for (const jobs of ['0', '1', '2', '8']) {
      const { json } = await runJson<BuildJson>(['build', modelPath, '--out', join(temp.path, `cache-jobs-${jobs}`), '--jobs', jobs, '--inline-max-mib', '0']);
      reports.push(json);
    }
    // Small tensors: the bound is ~150 MB, which two workers and the 32 MiB slab fill.
    expect(reports.map((r) => [r.jobs, r.workers])).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [8, 2],
    ]);
    const shape = (r: BuildJson) => r.tensors.map((t) => [t.name, t.key, t.status, t.compBytes]);
    for (const report of reports.slice(1)) expect(shape(report)).toEqual(shape(reports[0]!));
    const blobs = async (jobs: string) => (await readdir(join(temp.path, `cache-jobs-${jobs}`, 'blobs'))).sort();
    expect(await blobs('2')).toEqual(await blobs('0'));
    expect(await blobs('8')).toEqual(await blobs('0'));
  });

  it('every encode backend writes the same payloads (gpu.js cpu and webasm, the codec path)', async () => {
    const blobsOf = async (dir: string) => {
      const names = (await readdir(join(dir, 'blobs'))).filter((n) => n.endsWith('.bin')).sort();
      return Promise.all(names.map(async (n) => [n, (await readFile(join(dir, 'blobs', n))).toString('base64')]));
    };
    const reference = join(temp.path, 'cache-backend-codec');
    const { json: codecReport } = await runJson<BuildJson>(['build', modelPath, '--out', reference, '--backend', 'codec']);
    expect(codecReport.backend).toBe('codec');
    for (const backend of ['cpu', 'webasm']) {
      const dir = join(temp.path, `cache-backend-${backend}`);
      const { json } = await runJson<BuildJson>(['build', modelPath, '--out', dir, '--backend', backend]);
      expect(json.backend).toBe(backend);
      expect(await blobsOf(dir)).toEqual(await blobsOf(reference));
    }
    // No WebGPU adapter here: the build says so and falls back to the codec path.
    // --quiet drops the bar and the table, never the warning; --json says what was asked and why it fell back.
    const webgpu = await runCli(['build', modelPath, '--out', join(temp.path, 'cache-backend-webgpu'), '--backend', 'webgpu', '--quiet']);
    expect(webgpu.code).toBe(0);
    const { json: webgpuReport } = await runJson<BuildJson>(['build', modelPath, '--out', join(temp.path, 'cache-backend-webgpu-json'), '--backend', 'webgpu']);
    expect(webgpuReport.backend_requested).toBe('webgpu');
    if (!webgpu.stdout.includes('backend webgpu')) {
      expect(webgpu.stderr).toMatch(/^splitzip build: warning: .+; using codec$/m);
      expect(webgpu.stdout).toContain('backend codec (webgpu did not start)');
      expect(webgpuReport).toMatchObject({ backend: 'codec', fallback_reason: expect.stringMatching(/./) });
    } else {
      expect(webgpuReport.fallback_reason).toBeNull();
    }
    expect(codecReport).toMatchObject({ backend_requested: 'codec', fallback_reason: null });
  });

  it('verify fails, naming the entry, when a blob is corrupted', async () => {
    const corruptCache = join(temp.path, 'cache-corrupt');
    const { json: built } = await runJson<BuildJson>(['build', modelPath, '--out', corruptCache]);
    const victim = built.tensors.find((t) => t.name === 'model.layers.0.self_attn.q_proj.weight')!;
    const blobPath = join(corruptCache, 'blobs', `${victim.key}.bin`);
    const blob = await readFile(blobPath);
    blob[blob.length - 300]! ^= 0x10;
    await writeFile(blobPath, blob);
    const text = await runCli(['verify', corruptCache]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(victim.key!);
    expect(text.stdout.trim().endsWith('FAILED')).toBe(true);
    const { json } = await runJson<VerifyJson>(['verify', corruptCache, '--model', modelPath], 1);
    expect(json.ok).toBe(false);
    expect(json.store.problems.map((p) => p.key)).toEqual([victim.key]);
    const failed = json.model!.tensors.filter((t) => t.status === 'failed');
    expect(failed.map((t) => t.name)).toEqual([victim.name]);
  });
});

describe('worker threads sized from the model', () => {
  const blobsOf = async (dir: string) => {
    const names = (await readdir(join(dir, 'blobs'))).filter((n) => n.endsWith('.bin')).sort();
    return Promise.all(names.map(async (n) => [n, (await readFile(join(dir, 'blobs', n))).toString('base64')]));
  };

  it('starts workers beyond the first two once the model is sized, where they fit (tensors of 2.9 MB: bound ~159 MB, three fit)', async () => {
    const tensors = [0, 1, 2, 3].map((i) => gaussianBf16(`model.layers.${i}.mlp.weight`, [1024, 1400], 40 + i));
    const modelPath = await writeSingleFileModel(join(temp.path, 'three-workers.safetensors'), tensors);
    const reference = join(temp.path, 'cache-three-workers-0');
    await runJson<BuildJson>(['build', modelPath, '--out', reference, '--jobs', '0']);
    for (const [jobs, workers] of [
      ['3', 3],
      ['8', 3],
    ] as const) {
      const dir = join(temp.path, `cache-three-workers-${jobs}`);
      const { json } = await runJson<BuildJson>(['build', modelPath, '--out', dir, '--jobs', jobs, '--inline-max-mib', '0']);
      expect([json.jobs, json.workers]).toEqual([Number(jobs), workers]);
      expect(json.encoded).toBe(4);
      expect(await blobsOf(dir)).toEqual(await blobsOf(reference));
      const { json: verify } = await runJson<VerifyJson>(['verify', dir, '--model', modelPath]);
      expect(verify.ok).toBe(true);
    }
  });

  it('builds a model with at most --inline-max-mib of BF16 on the main thread, with the same payloads as workers', async () => {
    // Two tensors of 2.9 MB: 5.7 MB of BF16.
    const tensors = [0, 1].map((i) => gaussianBf16(`model.layers.${i}.mlp.weight`, [1024, 1400], 60 + i));
    const modelPath = await writeSingleFileModel(join(temp.path, 'inline.safetensors'), tensors);
    const run = async (name: string, extra: string[]) => {
      const dir = join(temp.path, name);
      const { json } = await runJson<BuildJson>(['build', modelPath, '--out', dir, '--jobs', '2', ...extra]);
      return { dir, json };
    };
    const byDefault = await run('cache-inline-default', []);
    const workers = await run('cache-inline-workers', ['--inline-max-mib', '0']);
    const justBelow = await run('cache-inline-below', ['--inline-max-mib', '5']);
    const justAbove = await run('cache-inline-above', ['--inline-max-mib', '6']);
    expect([byDefault, workers, justBelow, justAbove].map(({ json }) => [json.jobs, json.workers, json.encoded])).toEqual([
      [2, 0, 2],
      [2, 2, 2],
      [2, 2, 2],
      [2, 0, 2],
    ]);
    expect(await blobsOf(byDefault.dir)).toEqual(await blobsOf(workers.dir));
    const text = await runCli(['build', modelPath, '--out', join(temp.path, 'cache-inline-text')]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/backend \S+, encoded on the main thread \(0 of \d+ worker threads used\)$/m);
    const bad = await runCli(['build', modelPath, '--out', join(temp.path, 'cache-inline-bad'), '--inline-max-mib', '-1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--inline-max-mib');
  });

  it('stops the start-up workers a model with fewer tensors does not need', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'one-bf16.safetensors'), [
      gaussianBf16('model.embed_tokens.weight', [64, 96], 7),
      float32Tensor('model.norm.weight', [96], 8),
    ]);
    const dir = join(temp.path, 'cache-one-bf16');
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', dir, '--jobs', '2', '--inline-max-mib', '0']);
    expect([json.jobs, json.workers, json.encoded, json.skipped_dtype]).toEqual([2, 1, 1, 1]);
    const { json: verify } = await runJson<VerifyJson>(['verify', dir, '--model', modelPath]);
    expect(verify.ok).toBe(true);
  });
});

describe('sharded models and a second model sharing tensors', () => {
  it('builds from the index, the directory, and stores only what a second model adds', async () => {
    const shared = [gaussianBf16('a.weight', [128, 64], 101), gaussianBf16('b.weight', [64, 65], 102), outlierBf16('c.weight', [99, 77], 103)];
    const modelA = [...shared, gaussianBf16('a_only.weight', [50, 50], 104), gaussianBf16('a_only2.weight', [70, 33], 105)];
    const dirA = join(temp.path, 'sharded-a');
    const { indexPath, shardPaths } = await writeShardedTestModel(dirA, modelA, 20_000);
    expect(shardPaths.length).toBeGreaterThanOrEqual(3);
    const cacheDir = join(temp.path, 'cache-shared');

    const { json: a } = await runJson<BuildJson>(['build', indexPath, '--out', cacheDir]);
    checkBuildSums(a, modelA.length);
    expect(a.encoded).toBe(5);
    expect(new Set(a.tensors.map((t) => t.shard)).size).toBe(shardPaths.length);
    for (const t of a.tensors) expect(t.shard).toMatch(/^model-\d{5}-of-\d{5}\.safetensors$/);

    // The same model opened as a directory has the same slice keys: nothing new.
    const { json: again } = await runJson<BuildJson>(['build', dirA, '--out', cacheDir]);
    expect(again.encoded).toBe(0);
    expect(again.aliased).toBe(0);

    // Model B: the shared tensors under other names, in another layout, plus new ones.
    const modelB = [gaussianBf16('b_new.weight', [40, 81], 201), ...shared.map((t) => ({ ...t, name: `renamed.${t.name}` })), gaussianBf16('b_new2.weight', [3, 5], 202)];
    const dirB = join(temp.path, 'sharded-b');
    const b = await writeShardedTestModel(dirB, modelB, 30_000, 'other');
    const { json: bReport } = await runJson<BuildJson>(['build', b.indexPath, '--out', cacheDir]);
    checkBuildSums(bReport, modelB.length);
    expect(bReport.encoded).toBe(2);
    expect(bReport.cached).toBe(3);
    expect(bReport.stored_bytes).toBe(bReport.tensors.filter((t) => t.status === 'encoded').reduce((s, t) => s + t.compBytes!, 0));

    for (const path of [indexPath, b.indexPath]) {
      const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', path]);
      expect(json.ok).toBe(true);
      expect(json.model!.totals.failed).toBe(0);
      expect(json.model!.totals.not_cached).toBe(0);
    }
    const { json: inspect } = await runJson<InspectJson>(['inspect', cacheDir]);
    expect(inspect.totals.entries).toBe(7);
    // Shared entries carry one slice per model.
    expect(inspect.totals.slices).toBe(10);
  });

  it('a fine-tune with the same shard names binds beside its base (before 0.56 it conflicted on changed slices unless --rebind): both verify', async () => {
    const base = [gaussianBf16('l0.weight', [64, 64], 501), gaussianBf16('l1.weight', [64, 64], 502)];
    const tuned = [base[0]!, gaussianBf16('l1.weight', [64, 64], 503)];
    const baseDir = join(temp.path, 'base');
    const tunedDir = join(temp.path, 'tuned');
    const baseModel = await writeShardedTestModel(baseDir, base, 10_000);
    const tunedModel = await writeShardedTestModel(tunedDir, tuned, 10_000);
    const cacheDir = join(temp.path, 'cache-conflict');
    await runJson<BuildJson>(['build', baseModel.indexPath, '--out', cacheDir]);

    // One binding per file: the tuned l1 is bound beside the base's, l0 (the same bytes) gets the tuned file's stamp.
    const { json } = await runJson<BuildJson>(['build', tunedModel.indexPath, '--out', cacheDir]);
    expect(json).toMatchObject({ encoded: 1, cached: 1, aliased: 2 });
    for (const model of [baseModel, tunedModel]) {
      const { json: verified } = await runJson<VerifyJson>(['verify', cacheDir, '--model', model.indexPath]);
      expect(verified.ok).toBe(true);
      expect(verified.model!.tensors.every((t) => t.status === 'ok')).toBe(true);
    }
  });

  it("a copy of a model (new files): verifies, each tensor noted as checked once by the first load until a build adds its files' stamps", async () => {
    const tensors = [gaussianBf16('l0.weight', [64, 64], 601), gaussianBf16('l1.weight', [64, 64], 602)];
    const originalDir = join(temp.path, 'original');
    const copyDir = join(temp.path, 'copied');
    const original = await writeShardedTestModel(originalDir, tensors, 10_000);
    const cacheDir = join(temp.path, 'cache-copies');
    await runJson<BuildJson>(['build', original.indexPath, '--out', cacheDir]);
    await new Promise((resolve) => setTimeout(resolve, 20)); // file times tick coarsely
    await cp(originalDir, copyDir, { recursive: true });
    const copyIndex = join(copyDir, 'model.safetensors.index.json');
    // The runtime checks such a binding by content once (then records the file); verify, which
    // reads every byte, checks it here.
    const { json: before } = await runJson<VerifyJson>(['verify', cacheDir, '--model', copyIndex]);
    expect(before.ok).toBe(true);
    for (const tensor of before.model!.tensors) {
      expect(tensor).toMatchObject({ status: 'ok', unrecorded: true });
      expect(tensor.reason).toMatch(/^its binding has no record of this shard file \(\d+ bytes, modified .*\): its bytes are the entry's, so a load checks them once .* run build to record the file now$/);
    }
    const text = await runCli(['verify', cacheDir, '--model', copyIndex]);
    expect(text.code).toBe(0);
    // One note, then one short line per shard.
    expect(text.stdout.match(/^ {2}note: /gm)).toHaveLength(1);
    expect(text.stdout.match(/^ {4}\S+\.safetensors: \d+ tensors?$/gm)).toHaveLength(2);
    const { json: build } = await runJson<BuildJson>(['build', copyIndex, '--out', cacheDir]);
    expect(build).toMatchObject({ encoded: 0, cached: 2, aliased: 2 });
    for (const index of [copyIndex, original.indexPath]) {
      const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', index]);
      expect(json.ok).toBe(true);
      for (const tensor of json.model!.tensors) expect(tensor).toMatchObject({ status: 'ok', reason: null });
      expect(json.model!.tensors.some((t) => t.unrecorded)).toBe(false);
    }
    // Nothing left to add: a second build writes nothing.
    expect((await runJson<BuildJson>(['build', copyIndex, '--out', cacheDir])).json.aliased).toBe(0);
  });

  it('bindings with a stamp of the old form (caches built before 2026-12-05) or none at all: the runtime checks them, so verify notes them (it said plain ok)', async () => {
    const tensors = [gaussianBf16('old.weight', [64, 64], 631), gaussianBf16('none.weight', [64, 64], 632)];
    const modelPath = await writeSingleFileModel(join(temp.path, 'old-stamps.safetensors'), tensors);
    const cacheDir = join(temp.path, 'cache-old-stamps');
    const { calibrateCodebook, encode } = await import('@splitzip/codec');
    const { openSafetensorsModel, readTensorBytes } = await import('@splitzip/safetensors');
    const { computeContentKey } = await import('@splitzip/store');
    const model = await openSafetensorsModel(modelPath);
    const store = await openCacheStore(cacheDir, { create: true, coverageMin: 0.99 });
    try {
      const shard = model.shards[0]!;
      const items = [];
      for (const t of model.tensors) {
        const bytes = await readTensorBytes(model, t);
        const values = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
        const key = computeContentKey(bytes, t.shape, 'BF16');
        await store.addEntries([{ key, qualname: t.name, payload: encode(values, calibrateCodebook(values).codebook), shape: t.shape, dtype: 'BF16' }]);
        // The old form: size and mtime only (what builds before 2026-12-05 recorded); or no stamp.
        items.push({ key, ...t.slice, ...(t.name === 'old.weight' ? { stamp: shard.stamp!.split(':').slice(0, 2).join(':') } : {}) });
      }
      await store.aliasSlices(items);
    } finally {
      await store.close();
      await model.close();
    }
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(json.ok).toBe(true);
    for (const tensor of json.model!.tensors) expect(tensor, tensor.name).toMatchObject({ status: 'ok', unrecorded: true });
    // A build records the file's stamp: then nothing to note.
    await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const { json: after } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    for (const tensor of after.model!.tensors) expect(tensor, tensor.name).toMatchObject({ status: 'ok', reason: null });
    expect(after.model!.tensors.some((t) => t.unrecorded)).toBe(false);
  });

  it('a shard touched after the build (same bytes): ok, noted once for the shard with readable file times; rewritten with other bytes: FAIL once for the shard', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'touched.safetensors'), [0, 1, 2].map((i) => gaussianBf16(`t${i}.weight`, [64, 64], 611 + i)));
    const cacheDir = join(temp.path, 'cache-touched');
    await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const later = new Date(Date.now() + 60_000);
    await utimes(modelPath, later, later);
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    for (const tensor of json.model!.tensors) {
      expect(tensor).toMatchObject({ status: 'ok', unrecorded: true });
      expect(tensor.reason).toMatch(/no record of this shard file \(\d+ bytes, modified \d{4}-\d\d-\d\dT[\d:.]+Z, inode \d+ changed \d{4}-\d\d-\d\dT[\d:.]+Z; a copy/);
    }
    const text = await runCli(['verify', cacheDir, '--model', modelPath]);
    expect(text.code).toBe(0);
    expect(text.stdout.match(/^ {2}(FAIL|note:) /gm)).toHaveLength(1);
    // One short line per shard under one note that says why, guessing no cause (the stamps are in --json).
    expect(text.stdout).toMatch(/^ {2}note: cached, but no record of the file as it is now \(a load checks their bytes once; `splitzip build` records it\):\n {4}touched\.safetensors: 3 tensors$/m);

    // The same layout with other values, written over it: the bindings' entries are not these bytes.
    await writeSingleFileModel(modelPath, [0, 1, 2].map((i) => gaussianBf16(`t${i}.weight`, [64, 64], 621 + i)));
    const { json: rewritten } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath], 1);
    for (const tensor of rewritten.model!.tensors) {
      expect(tensor).toMatchObject({ status: 'failed', stale: true });
      expect(tensor.reason).toMatch(/was \d+ bytes, modified \d{4}-\d\d-\d\dT[\d:.]+Z, inode \d+ changed \d{4}-\d\d-\d\dT[\d:.]+Z, and it is \d+ bytes, modified \d{4}-.* holds other bytes \(changed, or another model's\): run build --rebind$/);
    }
    const failed = await runCli(['verify', cacheDir, '--model', modelPath]);
    expect(failed.code).toBe(1);
    expect(failed.stdout.match(/^ {2}FAIL /gm)).toHaveLength(1);
    // Past 120 columns a line goes on under its text (8 columns in).
    expect(failed.stdout.replace(/\n {8}/g, ' ')).toMatch(/^ {2}FAIL 3 tensors of touched\.safetensors \(its file holds other bytes than the entries they are bound to: changed, or another model's; e\.g\. t0\.weight\)/m);
  });

  it('a shard renamed after the build: its tensors FAIL once for the shard, naming the build that binds them; that build writes no blob, and verify passes', async () => {
    const dir = join(temp.path, 'renamed');
    const tensors = [0, 1, 2, 3].map((i) => gaussianBf16(`r${i}.weight`, [64, 64], 631 + i));
    const { indexPath, shardPaths } = await writeShardedTestModel(dir, tensors, 2 * 64 * 64 * 2);
    expect(shardPaths).toHaveLength(2);
    const cacheDir = join(temp.path, 'cache-renamed');
    await runJson<BuildJson>(['build', indexPath, '--out', cacheDir]);
    // The second shard renamed, and the index with it.
    const oldName = basename(shardPaths[1]!);
    await rename(shardPaths[1]!, join(dir, 'renamed-shard.safetensors'));
    await writeFile(indexPath, (await readFile(indexPath, 'utf8')).replaceAll(oldName, 'renamed-shard.safetensors'));

    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', indexPath], 1);
    const failed = json.model!.tensors.filter((t) => t.status === 'failed');
    expect(failed.map((t) => t.name)).toEqual(['r2.weight', 'r3.weight']);
    for (const tensor of failed) {
      expect(tensor).toMatchObject({ shard: 'renamed-shard.safetensors', unbound: true });
      expect(tensor.reason).toMatch(/its slice key is not aliased \(a renamed shard.*\): run build, which binds it and writes no blob$/);
    }
    const text = await runCli(['verify', cacheDir, '--model', indexPath]);
    expect(text.code).toBe(1);
    expect(text.stdout.match(/^ {2}FAIL /gm)).toHaveLength(1);
    expect(text.stdout.replace(/\n {8}/g, ' ')).toMatch(/^ {2}FAIL 2 tensors of renamed-shard\.safetensors \(e\.g\. r2\.weight\): in the cache by content key, but its slice key is not aliased/m);
    expect(text.stdout.replace(/\n {8}/g, ' ')).toContain(`  slices not bound: \`splitzip build ${indexPath} --out ${cacheDir}\` binds them to the entries that hold their bytes (no blob is written)`);

    // The command it names: binds both, writes no blob.
    const { json: rebuilt } = await runJson<BuildJson>(['build', indexPath, '--out', cacheDir]);
    expect(rebuilt).toMatchObject({ encoded: 0, cached: 4, aliased: 2, stored_bytes: 0 });
    expect((await runJson<VerifyJson>(['verify', cacheDir, '--model', indexPath])).json.ok).toBe(true);
  });

  it('a slice bound, with its file\'s very stamp, to an entry of other bytes: FAIL naming build --rebind, which mends it', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'crossed.safetensors'), [gaussianBf16('a.weight', [64, 64], 641), gaussianBf16('b.weight', [64, 64], 642)]);
    const cacheDir = join(temp.path, 'cache-crossed');
    const { json: built } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const [a, b] = built.tensors;
    const { openSafetensorsModel } = await import('@splitzip/safetensors');
    const model = await openSafetensorsModel(modelPath);
    const store = await openCacheStore(cacheDir);
    try {
      // a's slice moved to b's entry with the file's current stamp: trusted, but not a's bytes.
      await store.aliasSlices([{ key: b!.key!, shardName: a!.shard, offsetBytes: a!.offsetBytes, sizeBytes: a!.sizeBytes, stamp: model.shards[0]!.stamp! }], { rebind: true });
    } finally {
      await store.close();
      await model.close();
    }
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath], 1);
    expect(json.model!.tensors.find((t) => t.name === 'a.weight')!.reason).toBe(`slice key bound to entry ${b!.key}, but the file now holds ${a!.key} (shard changed since the build?): run build --rebind`);
    expect((await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--rebind'])).json).toMatchObject({ encoded: 0, aliased: 1, stored_bytes: 0 });
    expect((await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath])).json.ok).toBe(true);
  });

  // The file's mtime put back moves its ctime past every recorded one: it takes a slot (the files
  // changed most recently keep them), so a build records it. One changed before all 16 never is:
  // verify-stamp-not-kept.test.ts. (Through 4277873 verify guessed "may have been dropped".)
  it('a file whose stamp is not among its binding\'s MAX_SLICE_STAMPS, changed after them: unrecorded, a build records it', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'many-copies.safetensors'), [gaussianBf16('w.weight', [64, 64], 811)]);
    const cacheDir = join(temp.path, 'cache-many-copies');
    await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const { mtime: first } = await stat(modelPath);
    for (let i = 1; i <= MAX_SLICE_STAMPS; i++) {
      const at = new Date(first.getTime() + i * 60_000);
      await utimes(modelPath, at, at);
      await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    }
    await utimes(modelPath, first, first);
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(json.model!.tensors[0]).toMatchObject({ status: 'ok', unrecorded: true });
    expect(json.model!.tensors[0]!.stampNotKept).toBeUndefined();
    expect(json.model!.tensors[0]!.reason).toMatch(/run build to record the file now/);
    await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const { json: after } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(after.model!.tensors[0]).toMatchObject({ status: 'ok', reason: null });
  });

  it('more byte-identical tensors than one entry binds slices for: the rest stay unbound (served raw), the build and its re-runs succeed', async () => {
    // 2048 values: large enough that a payload is smaller than the raw bytes (the build stores no others).
    const ones = new Uint8Array(4096);
    for (let i = 0; i < 2048; i++) ones.set([0x80, 0x3f], 2 * i); // BF16 1.0, little-endian
    const count = MAX_SLICE_KEYS_PER_ENTRY + 3;
    const tensors: TensorData[] = Array.from({ length: count }, (_, i) => ({ name: `layers.${i}.norm.weight`, dtype: 'BF16', shape: [2048], data: ones }));
    tensors.push(gaussianBf16('last.weight', [64, 64], 701));
    const modelPath = await writeSingleFileModel(join(temp.path, 'many-identical.safetensors'), tensors);
    const cacheDir = join(temp.path, 'cache-many-identical');
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    expect(json).toMatchObject({ encoded: 2, cached: count - 1, unaliased: 3 });
    expect(json.tensors.filter((t) => t.unaliased === true)).toHaveLength(3);
    const { json: verify } = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(verify.model!.totals).toMatchObject({ ok: MAX_SLICE_KEYS_PER_ENTRY + 1, not_cached: 3, failed: 0 });
    const again = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    expect(again.json).toMatchObject({ encoded: 0, aliased: 0, unaliased: 3 });
    // The text report says so too (it used to show only "already cached").
    const text = await runCli(['build', modelPath, '--out', cacheDir]);
    expect(text.stdout.replace(/\n {8}/g, ' ')).toContain('; 3 of them left unbound (served raw');
    expect(text.stdout.match(/cached, unbound/g)).toHaveLength(3);
    expect(text.stdout).toMatch(/ratio \d+\.\d+ \(\d+\.\d% smaller\)/);
  }, 60_000);

  it('a tensor name longer than the store keeps (MAX_QUALNAME_CHARS) still builds: the entry is labelled with its cut name', async () => {
    const long = `model.${'x'.repeat(MAX_QUALNAME_CHARS + 100)}.weight`;
    const modelPath = await writeSingleFileModel(join(temp.path, 'long-name.safetensors'), [gaussianBf16(long, [64, 64], 801), gaussianBf16('after', [64, 64], 802)]);
    const cacheDir = join(temp.path, 'cache-long-name');
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    expect(json).toMatchObject({ encoded: 2 });
    expect((await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath])).json.ok).toBe(true);
    const store = await openCacheStore(cacheDir);
    const entry = store.getEntry(json.tensors.find((t) => t.name === long)!.key!)!;
    expect(entry.qualname).toHaveLength(MAX_QUALNAME_CHARS);
    expect(long.startsWith(entry.qualname.slice(0, -1))).toBe(true);
    await store.close();
  });

  it('a long name is cut on a whole character: never half of a surrogate pair (an emoji at the cut left a lone \\ud83d in manifest.json)', async () => {
    const long = `${'a'.repeat(MAX_QUALNAME_CHARS - 2)}\u{1F600}${'b'.repeat(50)}`;
    const modelPath = await writeSingleFileModel(join(temp.path, 'emoji-name.safetensors'), [gaussianBf16(long, [64, 64], 803)]);
    const cacheDir = join(temp.path, 'cache-emoji-name');
    const { json } = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir]);
    const store = await openCacheStore(cacheDir);
    const entry = store.getEntry(json.tensors[0]!.key!)!;
    await store.close();
    expect(entry.qualname).toBe(`${'a'.repeat(MAX_QUALNAME_CHARS - 2)}…`);
    expect(Buffer.from(entry.qualname).toString()).toBe(entry.qualname); // survives UTF-8: no lone surrogate
  });

  // "\ud83d" alone is valid JSON but no text: the reference reader (serde_json) refuses such a header,
  // and so does @splitzip/safetensors since 2026-12-06 (the builder labelled the tensor with U+FFFD).
  it('a header naming a tensor with a lone surrogate is refused (HEADER_INVALID_JSON), nothing written', async () => {
    // JSON.stringify escapes a lone surrogate as \ud83d (well-formed JSON.stringify, ES2019).
    const header = Buffer.from(JSON.stringify({ 'layers.\ud83d.weight': { dtype: 'BF16', shape: [16], data_offsets: [0, 32] } }));
    expect(header.includes('\\ud83d')).toBe(true);
    const padded = Buffer.concat([header, Buffer.alloc((8 - (header.length % 8)) % 8, 0x20)]);
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(padded.length));
    const modelPath = join(temp.path, 'lone-surrogate.safetensors');
    await writeFile(modelPath, Buffer.concat([prefix, padded, Buffer.alloc(32)]));
    const cacheDir = join(temp.path, 'cache-lone-surrogate');
    const { json } = await runJson<{ error: { code: string } }>(['build', modelPath, '--out', cacheDir], 1);
    expect(json.error.code).toBe('HEADER_INVALID_JSON');
    await expect(stat(cacheDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('verify --model reports a tensor the cache is missing and fails', async () => {
    const dir = join(temp.path, 'missing');
    const small = await writeSingleFileModel(join(temp.path, 'small.safetensors'), [gaussianBf16('x', [64, 64], 301)]);
    const bigger = await writeSingleFileModel(join(temp.path, 'bigger.safetensors'), [gaussianBf16('x', [64, 64], 301), gaussianBf16('y', [64, 64], 302)]);
    await runJson<BuildJson>(['build', small, '--out', dir]);
    const { json } = await runJson<VerifyJson>(['verify', dir, '--model', bigger], 1);
    expect(json.ok).toBe(false);
    const byName = new Map(json.model!.tensors.map((t) => [t.name, t]));
    expect(byName.get('y')!.status).toBe('failed');
    expect(byName.get('y')!.reason).toMatch(/missing/);
    // x is cached by content, but its slice in bigger.safetensors was never aliased.
    expect(byName.get('x')!.status).toBe('failed');
    expect(byName.get('x')!.reason).toMatch(/slice key is not aliased/);
  });
});

describe('gc', () => {
  it('removes an orphan blob and leaves a valid cache', async () => {
    const cacheDir = join(temp.path, 'cache-gc');
    const model = await writeSingleFileModel(join(temp.path, 'gc.safetensors'), [gaussianBf16('w', [32, 32], 401)]);
    await runJson<BuildJson>(['build', model, '--out', cacheDir]);
    const orphan = join(cacheDir, 'blobs', `${'0'.repeat(40)}.bin`);
    await writeFile(orphan, new Uint8Array(512));
    const result = await runCli(['gc', cacheDir]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/removed 1 orphan blob\b/);
    expect(await readdir(join(cacheDir, 'blobs'))).not.toContain(`${'0'.repeat(40)}.bin`);
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', model]);
    expect(json.ok).toBe(true);
  });
});
