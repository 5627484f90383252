// The no-gain skip is opt-in (build --skip-no-gain): a default build encodes every BF16 tensor that
// passes the gate, tiny or not (issue #6's contract; a runtime cacheOnly load of an all-BF16 model
// needs them). With the option, build, stats, verify --model (and the runtime) give one reason in
// one order; a bound slice is never skipped unread; a skipped tensor's stale binding is removed by
// --rebind and reported by verify.
import { cp, mkdir, readFile, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '@splitzip/store';
import { createTempDir, escapeHeavyBf16, gaussianBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';
import type { BuildJson, StatsJson, VerifyJson } from './helpers/reports.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-skip-no-gain-');
});
afterAll(async () => temp?.cleanup());

async function runJson<T>(argv: string[], code = 0): Promise<T> {
  const result = await run([...argv, '--json', '--quiet']);
  expect(result.code, result.err).toBe(code);
  return JSON.parse(result.out) as T;
}

/** `count` values over 16 exponents (100..115) but `escapes` of them over rarer ones (1..90). */
function withEscapes(name: string, count: number, escapes: number): TensorData {
  const values = new Uint16Array(count);
  for (let i = 0; i < count; i++) values[i] = ((i < escapes ? 1 + (i % 90) : 100 + (i % 16)) << 7) | (i & 0x7f);
  return { name, dtype: 'BF16', shape: [count], data: new Uint8Array(values.buffer) };
}

// big: shrinks; norm (768 values): no payload of it shrinks; tiny.lowcov (512 values): neither
// shrinks nor passes the gate; escaping (1,500 values, 1 escape, coverage 0.9993): would shrink but
// for its one escape; five (~5 % escapes, coverage 0.94995): under the default gate, shrinks.
const tensors = (seed: number): TensorData[] => [
  gaussianBf16('big.weight', [64, 64], seed),
  gaussianBf16('norm.weight', [768], seed + 1),
  escapeHeavyBf16('tiny.lowcov', [512], seed + 2),
  withEscapes('escaping.weight', 1500, 1),
  withEscapes('five.weight', 4096, 205),
];
// Counts with thousands separators, as every other count (`1,024 bytes`; until 2026-12-07 `1024 bytes`): a payload is 1 KiB at least.
const NO_GAIN_REASON = /^would not shrink \(skipped by build --skip-no-gain\): its payload would be \d{1,3}(,\d{3})+ bytes, not smaller than its \d{1,3}(,\d{3})* raw bytes/;

describe('a default build', () => {
  it('encodes every BF16 tensor that passes the gate, tiny or not (skipped_no_gain 0); stats flags those that would not shrink', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'default.safetensors'), tensors(1));
    const cacheDir = join(temp.path, 'cache-default');
    const build = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    const status = Object.fromEntries(build.tensors.map((t) => [t.name, t.status]));
    expect(status).toEqual({ 'big.weight': 'encoded', 'norm.weight': 'encoded', 'tiny.lowcov': 'skipped_coverage', 'escaping.weight': 'encoded', 'five.weight': 'skipped_coverage' });
    expect(build).toMatchObject({ encoded: 3, skipped_coverage: 2, skipped_no_gain: 0 });
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals).toMatchObject({ ok: 3, not_cached: 2, failed: 0 });
    // No build caches the tiny tensor under the gate; verify names both reasons, a default build's first
    // (skipped_coverage, as the runtime's `coverage`), the opted-in build's first with --skip-no-gain.
    const tiny = verify.model!.tensors.find((t) => t.name === 'tiny.lowcov')!;
    expect(tiny.reason).toMatch(/^Top-16 coverage 0\.\d+ < 0\.99, and it would not shrink either \(its payload would be [\d,]+ bytes, not smaller than its [\d,]+ raw bytes\)$/);
    const optIn = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--skip-no-gain']);
    expect(optIn.model!.tensors.find((t) => t.name === 'tiny.lowcov')!.reason).toMatch(NO_GAIN_REASON);
    expect(optIn.model!.tensors.find((t) => t.name === 'tiny.lowcov')!.reason).toMatch(/; its Top-16 coverage 0\.\d+ < 0\.99 too/);

    const stats = await runJson<StatsJson>(['stats', modelPath]);
    expect(stats.skipNoGain).toBe(false);
    expect(stats.tensors.map((t) => [t.name, t.verdict, t.shrinks])).toEqual([
      ['big.weight', 'encode', true],
      ['norm.weight', 'encode', false],
      ['tiny.lowcov', 'skip_coverage', false],
      ['escaping.weight', 'encode', false],
      ['five.weight', 'skip_coverage', true],
    ]);
    expect(stats.totals).toMatchObject({ encodableTensors: build.encoded, coverageSkippedTensors: build.skipped_coverage, noGainTensors: 3 });
    const text = await run(['stats', modelPath, '--quiet']);
    expect(text.out).toMatch(/^tensor\s+dtype\s+shape\s+raw\s+exps\s+top16\s+H\(exp\)\s+predicted\s+ratio\s+shrinks\s+build/m);
    expect(text.out).toMatch(/norm\.weight\s+BF16\s+\[768\].*\sno\s+encode/);
    // tiny.lowcov is not one: a default build skips it for coverage.
    // Lines past 120 columns go on under their value (10 columns in).
    expect(text.out.replace(/\n {10}/g, ' ')).toContain('5 BF16, 3 pass the 0.99 coverage gate; 2 of them would not shrink (payload not smaller than raw: encoded all the same, build --skip-no-gain skips them)');
  });

  it('says how much larger the cached tensors are where tiny ones grew', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'tiny-only.safetensors'), [gaussianBf16('norm.weight', [768], 71), gaussianBf16('bias', [128], 72)]);
    const text = await run(['build', modelPath, '--out', join(temp.path, 'cache-tiny-only'), '--quiet']);
    expect(text.code, text.err).toBe(0);
    expect(text.out).toMatch(/^cached .*, ratio \d+\.\d{4} \(\d+\.\d% larger\)$/m);
  });

  it('a lower gate encodes a tensor the default gate skips (~5 % escapes) that still shrinks, also with --skip-no-gain', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'low-gate.safetensors'), tensors(11));
    const cacheDir = join(temp.path, 'cache-low-gate');
    const build = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--coverage-min', '0.9', '--skip-no-gain', '--jobs', '0']);
    const five = build.tensors.find((t) => t.name === 'five.weight')!;
    expect(five.status).toBe('encoded');
    expect(five.coverage!).toBeLessThan(0.99);
    expect(five.compBytes!).toBeLessThan(five.sizeBytes);
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--skip-no-gain']);
    expect(verify.ok).toBe(true);
    expect(verify.model!.tensors.find((t) => t.name === 'five.weight')!.status).toBe('ok');
  });
});

describe('build --skip-no-gain', () => {
  it('skips what would not shrink, in one order with stats --skip-no-gain and verify --model: their totals agree', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'opt-in.safetensors'), tensors(21));
    const cacheDir = join(temp.path, 'cache-opt-in');
    const build = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--skip-no-gain', '--jobs', '0']);
    const status = Object.fromEntries(build.tensors.map((t) => [t.name, t.status]));
    // tiny.lowcov: no payload of it shrinks, decided unread, before its coverage.
    expect(status).toEqual({ 'big.weight': 'encoded', 'norm.weight': 'skipped_no_gain', 'tiny.lowcov': 'skipped_no_gain', 'escaping.weight': 'skipped_no_gain', 'five.weight': 'skipped_coverage' });
    expect(build).toMatchObject({ encoded: 1, skipped_coverage: 1, skipped_no_gain: 3 });

    const stats = await runJson<StatsJson>(['stats', modelPath, '--skip-no-gain']);
    expect(stats.skipNoGain).toBe(true);
    expect(Object.fromEntries(stats.tensors.map((t) => [t.name, t.verdict]))).toEqual({
      'big.weight': 'encode',
      'norm.weight': 'skip_no_gain',
      'tiny.lowcov': 'skip_no_gain',
      'escaping.weight': 'skip_no_gain',
      'five.weight': 'skip_coverage',
    });
    expect(stats.totals).toMatchObject({ encodableTensors: build.encoded, noGainTensors: build.skipped_no_gain, coverageSkippedTensors: build.skipped_coverage });

    // Judged as a default build, what it skipped would be missing: the cache records no --skip-no-gain.
    const asDefault = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath], 1);
    expect(asDefault.model!.tensors.find((t) => t.name === 'norm.weight')).toMatchObject({ status: 'failed' });
    expect(asDefault.model!.tensors.find((t) => t.name === 'norm.weight')!.reason).toMatch(/^missing: .*\(run build\); it would not shrink: verify --skip-no-gain judges/);
    expect(asDefault.model!.tensors.find((t) => t.name === 'tiny.lowcov')!.status).toBe('not_cached');
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--skip-no-gain']);
    expect(verify.ok).toBe(true);
    const notCached = verify.model!.tensors.filter((t) => t.status === 'not_cached');
    expect(notCached.filter((t) => NO_GAIN_REASON.test(t.reason ?? '')).map((t) => t.name)).toEqual(['norm.weight', 'tiny.lowcov', 'escaping.weight']);
    expect(notCached.filter((t) => /^Top-16 coverage/.test(t.reason ?? '')).map((t) => t.name)).toEqual(['five.weight']);
  });

  it('over a default build: a bound tiny tensor is not skipped unread but cached, its missing blob put back', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'upgrade.safetensors'), tensors(31));
    const cacheDir = join(temp.path, 'cache-upgrade');
    const first = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    const normKey = first.tensors.find((t) => t.name === 'norm.weight')!.key!;
    await rm(join(cacheDir, 'blobs', `${normKey}.bin`));
    const again = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--skip-no-gain', '--jobs', '0']);
    const byName = new Map(again.tensors.map((t) => [t.name, t]));
    expect(byName.get('norm.weight')).toMatchObject({ status: 'cached', repaired: true, repairedBlob: 'missing' });
    expect(byName.get('escaping.weight')!.status).toBe('cached');
    // Not bound (the default build skipped it for coverage): skipped unread.
    expect(byName.get('tiny.lowcov')!.status).toBe('skipped_no_gain');
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals).toMatchObject({ ok: 3, failed: 0 });
  });

  it('--repair over a default build puts back an empty tensor\'s missing blob (its slice is never bound: it was skipped unread)', async () => {
    const modelPath = await writeSingleFileModel(join(temp.path, 'empty.safetensors'), [gaussianBf16('big.weight', [64, 64], 61), { name: 'empty.weight', dtype: 'BF16', shape: [0, 4], data: new Uint8Array(0) }]);
    const cacheDir = join(temp.path, 'cache-empty');
    const first = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    const empty = first.tensors.find((t) => t.name === 'empty.weight')!;
    expect(empty.status).toBe('encoded');
    await rm(join(cacheDir, 'blobs', `${empty.key!}.bin`));
    const again = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--skip-no-gain', '--repair', '--jobs', '0']);
    expect(again.tensors.find((t) => t.name === 'empty.weight')).toMatchObject({ status: 'cached', repaired: true, repairedBlob: 'missing' });
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--skip-no-gain']);
    expect(verify.ok).toBe(true);
    expect(verify.model!.totals).toMatchObject({ ok: 2, failed: 0 });
    // A fresh build --skip-no-gain still skips it (nothing to put back).
    const fresh = await runJson<BuildJson>(['build', modelPath, '--out', join(temp.path, 'cache-empty-fresh'), '--skip-no-gain', '--jobs', '0']);
    expect(fresh.tensors.find((t) => t.name === 'empty.weight')!.status).toBe('skipped_no_gain');
  });
});

describe('a skipped tensor whose slice is bound to bytes the file held before', () => {
  it('fails verify (run build --rebind), and build --rebind removes the binding (coverage and no-gain skips)', async () => {
    // w: passes the gate, then rewritten under it; n: a 768-value norm a default build cached, then changed.
    const modelPath = await writeSingleFileModel(join(temp.path, 'stale.safetensors'), [gaussianBf16('w.weight', [64, 64], 41), gaussianBf16('n.weight', [768], 42)]);
    const cacheDir = join(temp.path, 'cache-stale');
    const first = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    expect(first.encoded).toBe(2);
    const oldKeys = Object.fromEntries(first.tensors.map((t) => [t.name, t.key]));
    // Rewritten in place (the same inode: a file replaced by rename reads as another model's of that
    // name): the same layout, other bytes (a later mtime, so its stamp differs).
    const next = await writeSingleFileModel(join(temp.path, 'stale-next.safetensors'), [escapeHeavyBf16('w.weight', [64, 64], 43), gaussianBf16('n.weight', [768], 44)]);
    await writeFile(modelPath, await readFile(next));
    const later = new Date(Date.now() + 10_000);
    await utimes(modelPath, later, later);
    const keep = join(temp.path, 'cache-stale-kept');
    await cp(cacheDir, keep, { recursive: true });

    const before = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath], 1);
    const w = before.model!.tensors.find((t) => t.name === 'w.weight')!;
    expect(w).toMatchObject({ status: 'failed', stale: true });
    expect(w.reason).toMatch(/run build --rebind$/);
    // Without --rebind: the build refuses (it never skipped past a binding to other bytes).
    const refused = await run(['build', modelPath, '--out', cacheDir, '--skip-no-gain', '--quiet']);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/SLICE_CONFLICT/);
    // The binding is stamped with this very file: refused as before, and the advice says --rebind removes it for a skipped tensor.
    expect(refused.err.replace(/\s+/g, ' ')).toContain('pass --rebind, which moves the slice to this tensor, or removes the binding where the build serves the tensor raw');

    const rebind = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--skip-no-gain', '--rebind', '--jobs', '0']);
    const byName = new Map(rebind.tensors.map((t) => [t.name, t]));
    expect(byName.get('w.weight')).toMatchObject({ status: 'skipped_coverage', unboundFrom: oldKeys['w.weight'] });
    expect(byName.get('n.weight')).toMatchObject({ status: 'skipped_no_gain', unboundFrom: oldKeys['n.weight'] });
    expect(rebind.unbound_stale).toBe(2);
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.lookupBySlice('stale.safetensors', first.tensors[0]!.offsetBytes, first.tensors[0]!.sizeBytes)).toBeUndefined();
    } finally {
      await store.close();
    }
    const after = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath, '--skip-no-gain']);
    expect(after.ok).toBe(true);
    expect(after.model!.totals).toMatchObject({ not_cached: 2, failed: 0 });

    // The text report names them.
    const text = await run(['build', modelPath, '--out', keep, '--rebind']);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/w\.weight\s+BF16\s+\[64,64\]\s+\S+ \S+\s+skipped_coverage \(stale binding removed\)/);
    expect(text.out.replace(/\n {8}/g, ' ')).toContain('; 1 skipped tensor\'s stale binding to other bytes removed');
  });
});

describe('two models of one shard name in one cache (text_encoder, text_encoder_2)', () => {
  it("build --rebind of one keeps the other's binding of a slice it skips, and verify of it gives the skip reason (they undid each other)", async () => {
    // n.weight: passes the gate in A, under it in B (same layout): B's skipped slice is bound to A's entry.
    await mkdir(join(temp.path, 'hub', 'text_encoder'), { recursive: true });
    await mkdir(join(temp.path, 'hub', 'text_encoder_2'), { recursive: true });
    const a = await writeSingleFileModel(join(temp.path, 'hub', 'text_encoder', 'model.safetensors'), [gaussianBf16('w.weight', [64, 64], 51), gaussianBf16('n.weight', [64, 64], 52)]);
    const b = await writeSingleFileModel(join(temp.path, 'hub', 'text_encoder_2', 'model.safetensors'), [gaussianBf16('w.weight', [64, 64], 51), escapeHeavyBf16('n.weight', [64, 64], 53)]);
    const cacheDir = join(temp.path, 'cache-shared-name');
    const first = await runJson<BuildJson>(['build', a, '--out', cacheDir, '--jobs', '0']);
    const n = first.tensors.find((t) => t.name === 'n.weight')!;
    const rebind = await runJson<BuildJson>(['build', b, '--out', cacheDir, '--rebind', '--jobs', '0']);
    const bn = rebind.tensors.find((t) => t.name === 'n.weight')!;
    expect(bn.status).toBe('skipped_coverage');
    expect(bn.unboundFrom).toBeUndefined();
    expect(rebind.unbound_stale ?? 0).toBe(0);
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.lookupBySlice('model.safetensors', n.offsetBytes, n.sizeBytes)?.key).toBe(n.key);
    } finally {
      await store.close();
    }
    const verifyB = await runJson<VerifyJson>(['verify', cacheDir, '--model', b]);
    expect(verifyB.ok).toBe(true);
    const skipped = verifyB.model!.tensors.find((t) => t.name === 'n.weight')!;
    expect(skipped.status).toBe('not_cached');
    expect(skipped.reason).toMatch(/^Top-16 coverage 0\.\d+ < 0\.99; its slice is bound to entry \w+ from another file of shard name model\.safetensors \(.*\): another revision's or model's, kept; or this model's shard before it was replaced by a new file \(a download\), which stays until newer files' bindings of the slice push it out$/);
    const verifyA = await runJson<VerifyJson>(['verify', cacheDir, '--model', a]);
    expect(verifyA.model!.totals).toMatchObject({ ok: 2, failed: 0 });
  });

  it('a second revision (HF hub snapshots: symlinks to blobs) with a tensor under the gate: a plain build leaves the first\'s binding alone, exit 0, and stamps the rest', async () => {
    // A user probe: this failed SLICE_CONFLICT ("pass --rebind"), recording no stamp for the shard's
    // other tensors, while verify --model passed ("another model's, kept") and --rebind kept it anyway.
    // Since 0.56 another file's binding is not in the way at all: no keptBinding, no note.
    const repo = join(temp.path, 'hub-revisions');
    await mkdir(join(repo, 'blobs'), { recursive: true });
    const blobA = await writeSingleFileModel(join(repo, 'blobs', 'a'), [gaussianBf16('w.weight', [64, 64], 71), gaussianBf16('n.weight', [64, 64], 72), gaussianBf16('x.weight', [64, 64], 73)]);
    const blobD = await writeSingleFileModel(join(repo, 'blobs', 'd'), [gaussianBf16('w.weight', [64, 64], 71), escapeHeavyBf16('n.weight', [64, 64], 74), gaussianBf16('x.weight', [64, 64], 73)]);
    const revA = join(repo, 'snapshots', 'a'.repeat(40));
    const revD = join(repo, 'snapshots', 'd'.repeat(40));
    await mkdir(revA, { recursive: true });
    await mkdir(revD, { recursive: true });
    await symlink(blobA, join(revA, 'model.safetensors'));
    await symlink(blobD, join(revD, 'model.safetensors'));
    const cacheDir = join(temp.path, 'cache-revisions');
    const first = await runJson<BuildJson>(['build', revA, '--out', cacheDir, '--jobs', '0']);
    expect(first.encoded).toBe(3);
    const n = first.tensors.find((t) => t.name === 'n.weight')!;
    const second = await runJson<BuildJson>(['build', revD, '--out', cacheDir, '--jobs', '0']);
    const byName = new Map(second.tensors.map((t) => [t.name, t]));
    expect(byName.get('n.weight')).toMatchObject({ status: 'skipped_coverage' });
    expect(byName.get('n.weight')!.keptBinding).toBeUndefined();
    expect(byName.get('n.weight')!.unboundFrom).toBeUndefined();
    expect(byName.get('w.weight')!.status).toBe('cached');
    expect(byName.get('x.weight')!.status).toBe('cached');
    // The other tensors' bindings got revision d's file stamp (its loads serve them unhashed).
    expect(second.aliased).toBe(2);
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.lookupBySlice('model.safetensors', n.offsetBytes, n.sizeBytes)?.key).toBe(n.key);
      for (const name of ['w.weight', 'x.weight']) {
        const t = byName.get(name)!;
        expect(store.lookupSliceBinding('model.safetensors', t.offsetBytes, t.sizeBytes)!.stamps).toHaveLength(2);
      }
    } finally {
      await store.close();
    }
    const text = await run(['build', revD, '--out', cacheDir]);
    expect(text.code, text.err).toBe(0);
    expect(text.out).toMatch(/n\.weight\s+BF16\s+\[64,64\]\s+\S+ \S+\s+skipped_coverage\s/);
    expect(text.out).not.toContain("other file's binding kept");
    expect(text.out).not.toContain('note    ');
    for (const rev of [revA, revD]) {
      const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', rev]);
      expect(verify.ok).toBe(true);
      expect(verify.model!.totals).toMatchObject({ failed: 0 });
    }
    // --rebind leaves it too, and so does --rebind --rebind-other-files (no effect since 0.56): revision a's binding.
    for (const extra of [[], ['--rebind-other-files']]) {
      const rebind = await runJson<BuildJson>(['build', revD, '--out', cacheDir, '--rebind', ...extra, '--jobs', '0']);
      const bn = rebind.tensors.find((t) => t.name === 'n.weight')!;
      expect(bn.status).toBe('skipped_coverage');
      expect(bn.keptBinding).toBeUndefined();
      expect(bn.unboundFrom).toBeUndefined();
    }
    const after = await openCacheStore(cacheDir);
    try {
      expect(after.lookupBySlice('model.safetensors', n.offsetBytes, n.sizeBytes)?.key).toBe(n.key);
    } finally {
      await after.close();
    }
  });

  it('its shard replaced by a new file (a download: another inode): --rebind and --rebind --rebind-other-files keep the binding (another file\'s since 0.56)', async () => {
    const dir = join(temp.path, 'replaced');
    await mkdir(dir, { recursive: true });
    const modelPath = await writeSingleFileModel(join(dir, 'model.safetensors'), [gaussianBf16('w.weight', [64, 64], 61), gaussianBf16('n.weight', [64, 64], 62)]);
    const cacheDir = join(temp.path, 'cache-replaced');
    const first = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--jobs', '0']);
    const n = first.tensors.find((t) => t.name === 'n.weight')!;
    // The new revision, written beside and renamed over the old file: n.weight now under the gate.
    const next = await writeSingleFileModel(join(dir, 'next.safetensors'), [gaussianBf16('w.weight', [64, 64], 61), escapeHeavyBf16('n.weight', [64, 64], 63)]);
    await rename(next, modelPath);
    const boundKey = async (): Promise<string | undefined> => {
      const store = await openCacheStore(cacheDir);
      try {
        return store.lookupBySlice('model.safetensors', n.offsetBytes, n.sizeBytes)?.key;
      } finally {
        await store.close();
      }
    };
    const verify = await runJson<VerifyJson>(['verify', cacheDir, '--model', modelPath]);
    expect(verify.model!.tensors.find((t) => t.name === 'n.weight')!.reason).toMatch(/which stays until newer files' bindings of the slice push it out$/);
    const kept = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--rebind', '--jobs', '0']);
    expect(kept.tensors.find((t) => t.name === 'n.weight')).toMatchObject({ status: 'skipped_coverage' });
    expect(kept.tensors.find((t) => t.name === 'n.weight')!.keptBinding).toBeUndefined();
    expect(await boundKey()).toBe(n.key);
    const usage = await run(['build', modelPath, '--out', cacheDir, '--rebind-other-files', '--quiet']);
    expect(usage.code).toBe(2);
    expect(usage.err).toMatch(/'--rebind-other-files' needs --rebind/);
    const removed = await runJson<BuildJson>(['build', modelPath, '--out', cacheDir, '--rebind', '--rebind-other-files', '--jobs', '0']);
    expect(removed.tensors.find((t) => t.name === 'n.weight')!.unboundFrom).toBeUndefined();
    expect(await boundKey()).toBe(n.key);
  });
});

