// gc --model and inspect --model judge "another file's binding" by the build's rule
// (isOtherFilesBinding): one file stamp of another inode is enough. A binding recorded with a base
// model and with its copy (a fine-tune) before the copy was saved in place is still the base's, and
// its loads use it: gc --model of the copy keeps it. --prune-other-files is the user's word that the
// other files were this model's, replaced (a download by rename): their bindings are judged as its own.
import { copyFile, mkdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GcCommandReport } from '../src/commands/gc.js';
import { createTempDir, escapeHeavyBf16, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { InspectJson, VerifyJson } from './helpers/reports.js';
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
const base = [0, 1, 2, 3].map((i) => gaussianBf16(`t${i}.weight`, [64, 64], 2100 + i));
// The next version: t0 changed (same shape), t1 resized (so t2 and t3 move).
const next = [gaussianBf16('t0.weight', [64, 64], 2200), gaussianBf16('t1.weight', [60, 64], 2201), base[2]!, base[3]!];

const inodeOf = async (path: string): Promise<bigint> => (await stat(path, { bigint: true })).ino;

/** The cache's bindings as `qualname@key[0..8]`, sorted. */
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

async function build(model: string, cache: string): Promise<void> {
  const result = await runCli(['build', model, '--out', cache]);
  expect(result.code, result.stderr).toBe(0);
}

describe('a copy saved in place (its bindings also hold the base file stamps)', () => {
  let baseFile: string;
  let ftFile: string;
  let cache: string;

  beforeAll(async () => {
    await mkdir(join(temp.path, 'base'));
    await mkdir(join(temp.path, 'ft'));
    baseFile = await writeSingleFileModel(join(temp.path, 'base', SHARD), base);
    ftFile = join(temp.path, 'ft', SHARD);
    await copyFile(baseFile, ftFile);
    cache = join(temp.path, 'cache');
    // Both files' stamps on every binding: ft's build finds base's bindings holding its bytes.
    await build(baseFile, cache);
    await build(ftFile, cache);
    // ft saved in place (same inode), then built: its changed tensors bound beside base's.
    const inode = await inodeOf(ftFile);
    const scratch = await writeSingleFileModel(join(temp.path, 'ft-next.safetensors'), next);
    await copyFile(scratch, ftFile);
    expect(await inodeOf(ftFile)).toBe(inode);
    await build(ftFile, cache);
  });

  it("gc --model of the copy keeps every base binding (other-file), and verify --model base still passes", async () => {
    const before = await bindingsOf(cache);
    const { json: dry } = await runJson<GcCommandReport>(['gc', cache, '--model', ftFile, '--dry-run']);
    expect(dry.bindings).toMatchObject({ live: 4, superseded: 0, leftover: 0, mismatched: 0, otherFileKept: 4, prune: [] });
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache, '--model', ftFile]);
    expect(inspect.bindings).toMatchObject({ live: 4, superseded: 0, leftover: 0, otherFileKept: 4, prune: [] });
    const { json: real } = await runJson<GcCommandReport>(['gc', cache, '--model', ftFile]);
    expect(real.bindings).toMatchObject({ removed: 0, prune: [] });
    expect(await bindingsOf(cache)).toEqual(before);
    const { json: verify } = await runJson<VerifyJson>(['verify', cache, '--model', baseFile]);
    expect(verify.ok).toBe(true);
  });
});

// verify --model named `build --rebind` for a skipped tensor whose slice holds the base's binding
// (also stamped with the copy's file before its save in place): no build removes another file's binding.
describe('verify --model of a copy saved in place with a tensor the build skips', () => {
  it("names the base's binding as another file's, kept, and passes", async () => {
    await mkdir(join(temp.path, 'v-base'));
    await mkdir(join(temp.path, 'v-ft'));
    const baseFile = await writeSingleFileModel(join(temp.path, 'v-base', SHARD), base);
    const ftFile = join(temp.path, 'v-ft', SHARD);
    await copyFile(baseFile, ftFile);
    const cache = join(temp.path, 'cache-v');
    await build(baseFile, cache);
    await build(ftFile, cache);
    // t0 now under the coverage gate (same shape, same span): the build skips it and leaves base's binding.
    const scratch = await writeSingleFileModel(join(temp.path, 'v-next.safetensors'), [escapeHeavyBf16('t0.weight', [64, 64], 2300), ...base.slice(1)]);
    await copyFile(scratch, ftFile);
    await build(ftFile, cache);
    const { json: verify } = await runJson<VerifyJson>(['verify', cache, '--model', ftFile]);
    const t0 = verify.model!.tensors.find((t) => t.name === 't0.weight')!;
    expect(t0.status).toBe('not_cached');
    expect(t0.reason).toContain('from another file of shard name model.safetensors');
    expect(t0.reason).not.toContain('run build --rebind');
    expect(verify.ok).toBe(true);
  });
});

describe('--prune-other-files: a model whose file a download replaced (new inode)', () => {
  let model: string;
  let cache: string;
  let oldBindings: string[];

  beforeAll(async () => {
    await mkdir(join(temp.path, 'dl'));
    model = await writeSingleFileModel(join(temp.path, 'dl', SHARD), base);
    cache = join(temp.path, 'cache-dl');
    await build(model, cache);
    oldBindings = await bindingsOf(cache);
    // Downloaded beside and renamed over: another inode.
    const inode = await inodeOf(model);
    await writeSingleFileModel(join(temp.path, 'dl', `${SHARD}.incomplete`), next);
    await rename(join(temp.path, 'dl', `${SHARD}.incomplete`), model);
    expect(await inodeOf(model)).not.toBe(inode);
    await build(model, cache);
  });

  it('is a usage error without --model', async () => {
    for (const command of ['gc', 'inspect']) {
      const result = await runCli([command, cache, '--prune-other-files']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("option '--prune-other-files' needs '--model <model>'");
    }
  });

  it('without it the old file bindings are kept; with it they go, and a drop reclaims their entries', async () => {
    const { json: kept } = await runJson<GcCommandReport>(['gc', cache, '--model', model, '--dry-run']);
    expect(kept.bindings!.prune).toEqual([]);
    expect(kept.bindings!.otherFileKept).toBeGreaterThan(0);
    // inspect's what-if judges as gc would.
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache, '--model', model, '--prune-other-files']);
    expect(inspect.bindings).toMatchObject({ pruneOtherFiles: true, otherFileKept: 0, live: 4 });
    // The old t0 (superseded by the new t0's binding) and the old t1, t2, t3 (at no tensor's span now).
    const judged = inspect.bindings!.prune.map((p) => `${p.qualname}:${p.verdict}:${p.otherFile === true}`).sort();
    expect(judged).toEqual(['t0.weight:superseded:true', 't1.weight:leftover:true', 't2.weight:leftover:true', 't3.weight:leftover:true']);
    expect(inspect.bindings!.otherFiles).toBe(4);
    const { json: pruned } = await runJson<GcCommandReport>(['gc', cache, '--model', model, '--prune-other-files']);
    expect(pruned.bindings).toMatchObject({ pruneOtherFiles: true, removed: 4 });
    const after = await bindingsOf(cache);
    for (const binding of oldBindings) expect(after).not.toContain(binding);
    // The old t0 and t1 entries are unbound now (t2, t3 are the same bytes: bound at their new spans).
    const { json: drop } = await runJson<GcCommandReport>(['gc', cache, '--drop-unbound-entries']);
    expect(drop.unboundEntries!.entries.map((e) => e.qualname).sort()).toEqual(['t0.weight', 't1.weight']);
    const { json: verify } = await runJson<VerifyJson>(['verify', cache, '--model', model]);
    expect(verify.ok).toBe(true);
  });
});
