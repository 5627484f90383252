// Revisions of one model (same shard name) bound side by side in one directory cache, a binding per
// file (FILE-BINDINGS.md): gc --model of one judges only its own file's bindings and keeps the
// other's, verify --model of each checks its own file's binding, inspect counts the shared slices.
// The cache is made through the store (helpers/bind-beside.ts), so that the test does not depend on
// how build binds.
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GcCommandReport } from '../src/commands/gc.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import type { InspectJson, VerifyJson } from './helpers/reports.js';
import { bindBeside } from './helpers/bind-beside.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => {
  await temp?.cleanup();
});

const SHARD = 'model.safetensors';
const a = gaussianBf16('a.weight', [64, 64], 1101);
const b = gaussianBf16('b.weight', [64, 64], 1102);
const c = gaussianBf16('c.weight', [64, 64], 1103);
const d = gaussianBf16('d.weight', [48, 64], 1104);
// Revision B: b changed (same shape), c resized (so d moves): the probe's revisions in small.
const bChanged = gaussianBf16('b.weight', [64, 64], 1202);
const cResized = gaussianBf16('c.weight', [32, 64], 1203);
// Revision A rewritten in place: b changed again, same layout.
const bRewritten = gaussianBf16('b.weight', [64, 64], 1302);

/** Writes a model directory holding `model.safetensors`; returns the directory. */
async function writeModel(dir: string, tensors: TensorData[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  await writeSingleFileModel(join(dir, SHARD), tensors);
  return dir;
}

/** Every binding of the cache, as `offset+size=qualname@key[0..8]`, sorted. */
async function bindingsOf(cache: string): Promise<string[]> {
  const store = await openCacheStore(cache);
  try {
    const out: string[] = [];
    for (const entry of store.entries()) for (const [, offset, size] of entry.sliceKeys) out.push(`${offset}+${size}=${entry.qualname}@${entry.key.slice(0, 8)}`);
    return out.sort();
  } finally {
    await store.close();
  }
}

/** The model's tensors whose slice the cache binds to their entry with the file's stamp now (what a load serves with no hash). */
async function trustedTensors(cache: string, model: string): Promise<number> {
  const { openSafetensorsModel } = await import('@splitzip/safetensors');
  const opened = await openSafetensorsModel(model);
  const store = await openCacheStore(cache);
  try {
    const stamp = opened.shards[0]!.stamp!;
    return opened.tensors.filter((t) => store.lookupSliceBinding(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes, stamp)?.stamps.includes(stamp) === true).length;
  } finally {
    await store.close();
    await opened.close();
  }
}

describe('revisions A and B of one shard name, bound side by side in one cache', () => {
  let modelA: string;
  let modelB: string;
  let cache: string;

  beforeAll(async () => {
    // B's file first: A's then has the newer ctime, so the slice's latest binding is A's.
    modelB = await writeModel(join(temp.path, 'rev-b'), [a, bChanged, cResized, d]);
    modelA = await writeModel(join(temp.path, 'rev-a'), [a, b, c, d]);
    cache = join(temp.path, 'cache');
    await bindBeside(cache, modelA, join(temp.path, 'scratch-a'));
    await bindBeside(cache, modelB, join(temp.path, 'scratch-b'));
    expect(await trustedTensors(cache, modelA)).toBe(4);
    expect(await trustedTensors(cache, modelB)).toBe(4);
  });

  it('verify --model checks each revision against its own binding: both OK', async () => {
    for (const model of [modelA, modelB]) {
      const { json } = await runJson<VerifyJson>(['verify', cache, '--model', model]);
      expect(json.model!.totals).toEqual({ tensors: 4, ok: 4, not_cached: 0, failed: 0, checked_bytes: expect.any(Number) });
    }
  });

  it("verify --model of a copy of B's file (no binding recorded with it) matches its bytes against every binding of the slice, as a load does: OK, unrecorded", async () => {
    const copy = join(temp.path, 'rev-b-copy');
    await mkdir(copy);
    await copyFile(join(modelB, SHARD), join(copy, SHARD));
    const { json } = await runJson<VerifyJson>(['verify', cache, '--model', copy]);
    expect(json.model!.totals).toMatchObject({ tensors: 4, ok: 4, failed: 0 });
    // b.weight's slice: the latest binding is A's; B's beside it holds these bytes.
    expect(json.model!.tensors.find((t) => t.name === 'b.weight')).toMatchObject({ status: 'ok', unrecorded: true });
  });

  it('inspect counts the slice bound for both files (b.weight\'s) and gives no shared-shard-name caution', async () => {
    const { json } = await runJson<InspectJson>(['inspect', cache]);
    expect(json.totals.slicesWithSeveralBindings).toBe(1);
    expect(json.totals.sharedShardNames).toEqual([SHARD]);
    expect(json.totals.sharedShardUnbound).toEqual({ entries: 0, shardNames: [] });
    const text = await runCli(['inspect', cache]);
    expect(text.stdout).toMatch(/slice keys; 1 slice bound for several files, one binding each\)/);
  });

  it('gc --model A keeps every binding of B\'s file: nothing removed, B\'s counted as other files\', and B still verifies with every tensor bound for its file', async () => {
    const before = await bindingsOf(cache);
    const { json: dry } = await runJson<GcCommandReport>(['inspect', cache, '--model', modelA, '--json']);
    const judged = (dry as unknown as InspectJson).bindings!;
    // Until 0.56: B's c and d bindings (at no span of A's file) judged left behind, removed.
    expect(judged.prune).toEqual([]);
    // A's a, b, c, d live (a's binding holds both files' stamps); B's b, c, d bindings are B's file's.
    expect(judged).toMatchObject({ live: 4, unchecked: 0, leftover: 0, mismatched: 0, superseded: 0, otherFileKept: 3, otherFiles: 0, prune: [] });
    const { json } = await runJson<GcCommandReport>(['gc', cache, '--model', modelA]);
    expect(json.bindings!.prune).toEqual([]);
    expect(json.bindings!.removed).toBe(0);
    expect(await bindingsOf(cache)).toEqual(before);
    expect(await trustedTensors(cache, modelB)).toBe(4);
    const { json: verifyB } = await runJson<VerifyJson>(['verify', cache, '--model', modelB]);
    expect(verifyB.model!.totals.ok).toBe(4);
    const text = await runCli(['gc', cache, '--model', modelA, '--dry-run']);
    expect(text.stdout.replace(/\n {4}/g, ' ')).toMatch(/kept 3 bindings recorded with other files of this model's shard names/);
  });

  it('gc --model A after A\'s file is rewritten in place (and bound again) removes only A\'s superseded binding; B keeps all of its', async () => {
    // Rewritten in place (same inode, new mtime): b.weight's bytes changed, the layout is the same.
    const rewrittenSource = await writeModel(join(temp.path, 'rev-a2-src'), [a, bRewritten, c, d]);
    await copyFile(join(rewrittenSource, SHARD), join(modelA, SHARD));
    await bindBeside(cache, modelA, join(temp.path, 'scratch-a2'));
    const before = await bindingsOf(cache);
    const { json } = await runJson<GcCommandReport>(['gc', cache, '--model', modelA]);
    const report = json.bindings!;
    expect(report.prune.map((p) => [p.qualname, p.verdict, p.key.slice(0, 8)])).toEqual([['b.weight', 'superseded', expect.any(String)]]);
    expect(report.removed).toBe(1);
    expect(report).toMatchObject({ live: 4, superseded: 1, otherFileKept: 3 });
    const after = await bindingsOf(cache);
    expect(before.filter((binding) => !after.includes(binding))).toHaveLength(1);
    expect(after).toHaveLength(before.length - 1);
    for (const model of [modelA, modelB]) {
      expect(await trustedTensors(cache, model)).toBe(4);
      const { json: verify } = await runJson<VerifyJson>(['verify', cache, '--model', model]);
      expect(verify.model!.totals).toMatchObject({ tensors: 4, ok: 4, failed: 0 });
    }
  });
});
