// gc --model / inspect --model: the bindings a model left behind in its cache (a re-shard under new
// names, a shard rewritten so that its tensors moved), judged against the model's files and removed
// (gc), or only counted (inspect, gc --dry-run); entries, blobs and other bindings stay. How the
// runtime then loads those models is the runtime's test (apps/runtime/test/gc-model-loads.test.ts):
// the builder does not depend on the runtime.
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeSafetensorsFile } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GcCommandReport } from '../src/commands/gc.js';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { createTempDir, float32Tensor, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { snapshotDir, type InspectJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, listObjects, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
const s3Client = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('gc-model');
afterAll(async () => {
  if (s3Client) {
    await dropBucket(s3Client, bucket);
    s3Client.destroy();
  }
  await temp?.cleanup();
});

// a, b and c have one size, c another shape; shard 1 holds a b c d, shard 2 e f g (maxShardBytes).
const a = gaussianBf16('a.weight', [64, 64], 901);
const b = gaussianBf16('b.weight', [64, 64], 902);
const c = gaussianBf16('c.weight', [32, 128], 903);
const d = gaussianBf16('d.weight', [48, 64], 904);
const e = gaussianBf16('e.weight', [128, 64], 905);
const f = gaussianBf16('f.weight', [64, 64], 906);
const g = float32Tensor('g.bias', [64], 907);
const TENSORS = [a, b, c, d, e, f, g];
const SHARD_1 = 'model-00001-of-00002.safetensors';

/** The model in `dir` as two shards (with its index), built into a new cache `cache`. */
async function buildTwoShardModel(dir: string, cache: string): Promise<void> {
  await writeShardedTestModel(dir, TENSORS, 4 * 8192);
  await runJson(['build', dir, '--out', cache, '--quiet']);
}

/**
 * Writes `tensors` over the file at `path` in place (its inode kept, as a writer opening it does):
 * its old bindings are this file's, judged. A file replaced by a rename has another inode: its old
 * bindings look like another file's (another revision's), which gc --model keeps since 0.56.
 */
async function rewriteInPlace(path: string, tensors: Parameters<typeof writeSafetensorsFile>[1]): Promise<void> {
  await writeSafetensorsFile(`${path}.new`, tensors, { format: 'pt' });
  await copyFile(`${path}.new`, path);
  await rm(`${path}.new`);
}

/** Every binding of the cache, as `shard@offset+size=qualname`. */
async function bindingsOf(cache: string): Promise<string[]> {
  const store = await openCacheStore(cache);
  try {
    const out: string[] = [];
    for (const entry of store.entries()) for (const [shard, offset, size] of entry.sliceKeys) out.push(`${shard}@${offset}+${size}=${entry.qualname}`);
    return out.sort();
  } finally {
    await store.close();
  }
}

/** What a model's tensors are, by name: the slices the safetensors reader gives. */
async function slicesOf(model: string): Promise<Map<string, { shardName: string; offsetBytes: number; sizeBytes: number }>> {
  const { openSafetensorsModel } = await import('@splitzip/safetensors');
  const opened = await openSafetensorsModel(model);
  try {
    return new Map(opened.tensors.map((t) => [t.name, t.slice]));
  } finally {
    await opened.close();
  }
}

describe('a model re-sharded under new names', () => {
  let model: string;
  let resharded: string;
  let cache: string;

  beforeAll(async () => {
    model = join(temp.path, 'v1');
    resharded = join(temp.path, 'resharded');
    cache = join(temp.path, 'cache-resharded');
    await buildTwoShardModel(model, cache);
    await writeShardedTestModel(resharded, TENSORS, 2 * 8192);
  });

  it('inspect --model and gc --model --dry-run count the old names\' bindings per name and change nothing', async () => {
    const before = await snapshotDir(cache);
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache, '--model', resharded]);
    const { json: dry } = await runJson<GcCommandReport>(['gc', cache, '--model', resharded, '--dry-run']);
    for (const bindings of [inspect.bindings!, dry.bindings!]) {
      expect(bindings).toMatchObject({ model: resharded, dryRun: true, pruneOtherShards: false, live: 0, unchecked: 0, leftover: 0, mismatched: 0, prune: [], removed: 0 });
      expect(bindings.shards).toEqual([1, 2, 3, 4].map((n) => `model-0000${n}-of-00004.safetensors`));
      expect(bindings.otherShards).toEqual([
        { shardName: SHARD_1, bindings: 4 },
        { shardName: 'model-00002-of-00002.safetensors', bindings: 2 },
      ]);
    }
    const text = await runCli(['gc', cache, '--model', resharded, '--dry-run']);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('would remove 0 bindings');
    // Within 120 columns, a long note's rest 4 columns in (~250 columns on one line before).
    expect(text.stdout.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(text.stdout.replace(/\n {4}/g, ' ')).toMatch(/kept 6 bindings of 2 shard names not in the model .*--prune-other-shards removes them/);
    expect(text.stdout).toMatch(/^ {2}model-00001-of-00002\.safetensors: 4$/m);
    const inspectText = await runCli(['inspect', cache, '--model', resharded]);
    expect(inspectText.stdout).toContain('gc --model would remove 0 bindings');
    // inspect --model's notes within 120 columns too, wrapped as gc's (a ~260-column line before).
    expect(inspectText.stdout.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(inspectText.stdout.replace(/\n {4}/g, ' ')).toMatch(/kept 6 bindings of 2 shard names not in the model .*--prune-other-shards removes them/);
    // With the flag, a dry run lists what it would remove.
    const { json: flagged } = await runJson<GcCommandReport>(['gc', cache, '--model', resharded, '--dry-run', '--prune-other-shards']);
    expect(flagged.bindings!.prune).toHaveLength(6);
    expect(new Set(flagged.bindings!.prune.map((p) => p.verdict))).toEqual(new Set(['other-shard']));
    expect(await snapshotDir(cache)).toEqual(before);
  });

  it('gc --model keeps other shard names\' bindings; with --prune-other-shards removes them, entries and blobs stay, and the cache verifies', async () => {
    const { json: kept } = await runJson<GcCommandReport>(['gc', cache, '--model', resharded]);
    // A real run with nothing to remove said dryRun: true.
    expect(kept.bindings).toMatchObject({ removed: 0, dryRun: false });
    expect(await bindingsOf(cache)).toHaveLength(6);

    const blobs = Object.keys(await snapshotDir(cache)).filter((name) => name.startsWith('blobs/')).sort();
    const { json: pruned } = await runJson<GcCommandReport>(['gc', cache, '--model', resharded, '--prune-other-shards']);
    expect(pruned.bindings).toMatchObject({ dryRun: false, pruneOtherShards: true, removed: 6 });
    expect(pruned.orphanBlobs).toEqual([]);
    expect(await bindingsOf(cache)).toEqual([]);
    expect(Object.keys(await snapshotDir(cache)).filter((name) => name.startsWith('blobs/')).sort()).toEqual(blobs);
    const text = await runCli(['gc', cache, '--model', resharded, '--prune-other-shards']);
    expect(text.stdout).toContain('removed 0 bindings');

    const verify = await runCli(['verify', cache, '--quiet']);
    expect(verify.code, verify.stdout).toBe(0);
  });
});

// The prune ran first, and its writer session recovered a dead writer's lock (or finished an
// interrupted fold) unreported: the dry run said '1 stale locks', the real run 0.
describe('gc --model on a cache a dead writer left locked', () => {
  it('reports the stale lock it recovers, as its dry run does, and prunes', async () => {
    const model = join(temp.path, 'locked');
    const cache = join(temp.path, 'cache-locked');
    await buildTwoShardModel(model, cache);
    await rewriteInPlace(join(model, SHARD_1), [b, c, d, a]);
    const { spawnSync } = await import('node:child_process');
    const { hostname } = await import('node:os');
    const dead = spawnSync(process.execPath, ['-e', ''], { stdio: 'ignore' }).pid!;
    await writeFile(join(cache, 'lock'), JSON.stringify({ pid: dead, host: hostname(), bootId: null, startTicks: null, token: 'dddddddddddddddd', createdMs: Date.now() }));
    const { json: dry } = await runJson<GcCommandReport>(['gc', cache, '--model', model, '--dry-run']);
    expect(dry.staleLocks).toEqual(['lock']);
    const { json } = await runJson<GcCommandReport>(['gc', cache, '--model', model]);
    expect(json.staleLocks).toEqual(['lock']);
    expect(json.bindings).toMatchObject({ dryRun: false, removed: dry.bindings!.prune.length });
    expect(json.bindings!.removed).toBeGreaterThan(0);
  });
});

describe('a shard rewritten so that its tensors moved, one of them onto another\'s old span', () => {
  let model: string;
  let cache: string;
  let slicesBefore: Map<string, { shardName: string; offsetBytes: number; sizeBytes: number }>;

  beforeAll(async () => {
    model = join(temp.path, 'shifted');
    cache = join(temp.path, 'cache-shifted');
    await buildTwoShardModel(model, cache);
    slicesBefore = await slicesOf(model);
    // In place: b c d a. b lands on a's old span (same shape), c on b's (another shape), d and a move to new spans.
    await rewriteInPlace(join(model, SHARD_1), [b, c, d, a]);
    const after = await slicesOf(model);
    expect(after.get('b.weight')).toEqual(slicesBefore.get('a.weight'));
    expect(after.get('c.weight')).toEqual(slicesBefore.get('b.weight'));
  });

  it('gc --model removes the bindings at no tensor\'s span and the one to an entry of another shape, keeps the live and the unchecked ones', async () => {
    const { json: dry } = await runJson<InspectJson>(['inspect', cache, '--model', model]);
    const expected = { live: 2, unchecked: 1, leftover: 2, mismatched: 1, otherShards: [] };
    expect(dry.bindings).toMatchObject(expected);
    const { json } = await runJson<GcCommandReport>(['gc', cache, '--model', model]);
    const report: ModelBindingsReport = json.bindings!;
    expect(report).toMatchObject({ ...expected, dryRun: false, removed: 3 });
    const old = (name: string) => slicesBefore.get(name)!;
    expect(report.prune.map((p) => `${p.qualname}@${p.offsetBytes}+${p.sizeBytes}:${p.verdict}`).sort()).toEqual(
      [
        `b.weight@${old('b.weight').offsetBytes}+${old('b.weight').sizeBytes}:mismatched`,
        `c.weight@${old('c.weight').offsetBytes}+${old('c.weight').sizeBytes}:leftover`,
        `d.weight@${old('d.weight').offsetBytes}+${old('d.weight').sizeBytes}:leftover`,
      ].sort(),
    );
    // What stays: e and f (shard 2, unchanged), and a at its old span, which b holds now (same shape: only the bytes tell).
    expect(await bindingsOf(cache)).toEqual(
      [`${SHARD_1}@${old('a.weight').offsetBytes}+${old('a.weight').sizeBytes}=a.weight`, `model-00002-of-00002.safetensors@${old('e.weight').offsetBytes}+${old('e.weight').sizeBytes}=e.weight`, `model-00002-of-00002.safetensors@${old('f.weight').offsetBytes}+${old('f.weight').sizeBytes}=f.weight`].sort(),
    );
    const text = await runCli(['gc', cache, '--model', model, '--dry-run']);
    expect(text.stdout).toContain('would remove 0 bindings');
    expect(text.stdout.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(text.stdout.replace(/\n {6}/g, ' ')).toMatch(/kept 1 unchecked binding .*--rebind/);
    // inspect's bindings lines (from `model <dir>:` on; its unbound line above names the cache's path).
    const inspectText = await runCli(['inspect', cache, '--model', model]);
    const bindingLines = inspectText.stdout.slice(inspectText.stdout.indexOf(`\nmodel ${model}:`));
    expect(bindingLines).toContain('kept 1 unchecked binding');
    expect(bindingLines.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(bindingLines.replace(/\n {6}/g, ' ')).toMatch(/kept 1 unchecked binding .*--rebind/);
    const verify = await runCli(['verify', cache, '--quiet']);
    expect(verify.code, verify.stdout).toBe(0);
  });
});

describeS3('an s3:// cache', () => {
  it('gc --model deletes the alias objects of the bindings a rewritten shard left behind; the bucket keeps no file stamps, so the others count as unchecked', async () => {
    const model = join(temp.path, 'shifted-s3');
    const url = `s3://${bucket}/c`;
    await writeShardedTestModel(model, TENSORS, 4 * 8192);
    await runJson(['build', model, '--out', url, '--quiet']);
    await rewriteInPlace(join(model, SHARD_1), [b, c, d, a]);
    const aliases = async () => (await listObjects(s3Client!, bucket)).filter((o) => o.key.startsWith('c/slices/')).length;
    expect(await aliases()).toBe(6);
    const { json } = await runJson<GcCommandReport>(['gc', url, '--model', model]);
    expect(json.bindings).toMatchObject({ live: 0, unchecked: 3, leftover: 2, mismatched: 1, removed: 3 });
    expect(await aliases()).toBe(3);
    const text = await runCli(['inspect', url, '--model', model]);
    expect(text.stdout).toContain('gc --model would remove 0 bindings');
    expect(text.stdout.replace(/\n +/g, ' ')).toContain('an s3:// cache keeps no file stamps in the bucket');
  });
});

describe('bad input', () => {
  let cache: string;
  beforeAll(async () => {
    const model = join(temp.path, 'for-bad-input');
    cache = join(temp.path, 'cache-bad-input');
    await buildTwoShardModel(model, cache);
  });

  it('a model that is not one, has no safetensors, or a damaged header: the reader\'s typed error, exit 1, the cache untouched', async () => {
    const empty = join(temp.path, 'empty-dir');
    await mkdir(empty);
    const notModel = join(temp.path, 'notes.txt');
    await writeFile(notModel, 'hi\n');
    const damagedDir = join(temp.path, 'damaged');
    await mkdir(damagedDir);
    const damaged = join(damagedDir, 'model.safetensors');
    await writeSafetensorsFile(damaged, [a], { format: 'pt' });
    const bytes = await readFile(damaged);
    bytes.write('garbage!', 8);
    await writeFile(damaged, bytes);
    const before = await snapshotDir(cache);
    for (const command of ['gc', 'inspect']) {
      for (const [modelPath, code] of [
        [empty, 'NOT_SAFETENSORS'],
        [notModel, 'HEADER_LENGTH_MISSING'],
        [damagedDir, 'HEADER_INVALID_JSON'],
        [join(temp.path, 'missing'), 'PATH_NOT_FOUND'],
      ] as const) {
        const result = await runCli([command, cache, '--model', modelPath]);
        expect(result.code, `${command} ${modelPath}: ${result.stderr}`).toBe(1);
        expect(result.stderr).toMatch(new RegExp(`^splitzip ${command}: error: ${code}: `));
        expect(result.stdout).toBe('');
      }
    }
    expect(await snapshotDir(cache)).toEqual(before);
  });

  it('usage errors (exit 2): an s3:// model, --prune-other-shards without --model, a near-miss flag', async () => {
    for (const command of ['gc', 'inspect']) {
      const url = await runCli([command, cache, '--model', 's3://bucket/model']);
      expect(url.code).toBe(2);
      expect(url.stderr).toContain('--model is read from local files');
      // Named where s3:// models are read (since 0.57).
      expect(url.stderr).toContain('build, verify --model and stats read s3:// models');
      const alone = await runCli([command, cache, '--prune-other-shards']);
      expect(alone.code).toBe(2);
      expect(alone.stderr).toContain("option '--prune-other-shards' needs '--model <model>'");
      const typo = await runCli([command, cache, '--model', cache, '--prune-other-shard']);
      expect(typo.code).toBe(2);
      expect(typo.stderr).toContain("did you mean '--prune-other-shards'?");
    }
  });
});
