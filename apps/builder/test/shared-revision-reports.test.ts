// Revisions of one model (same shard names, same layout) kept in one cache (user probe p3): what the
// builder reports must say how the cache changed. A --rebind says how many bindings it took from
// another file of the shard name; a build failing SLICE_CONFLICT part-way says what it committed
// before; inspect's unbound line warns that unbound entries may be another revision's in use.
import { access, cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCacheStore } from '@splitzip/store';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';
import type { BuildCommitted } from '../src/build-cache.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-shared-revision-');
});
afterAll(async () => temp?.cleanup());

/** Revision A: five tensors; revision C: the same layout with tensors 1, 2 and 4 of other bytes. */
function revisionA(): TensorData[] {
  return [0, 1, 2, 3, 4].map((i) => gaussianBf16(`layers.${i}.weight`, [64, 64], 10 + i));
}
function revisionC(): TensorData[] {
  return [0, 1, 2, 3, 4].map((i) => gaussianBf16(`layers.${i}.weight`, [64, 64], [1, 2, 4].includes(i) ? 100 + i : 10 + i));
}

/** A and C, each `model.safetensors` in a directory of its own (two files of one shard name). */
async function writeRevisions(name: string): Promise<{ a: string; c: string }> {
  await mkdir(join(temp.path, name, 'A'), { recursive: true });
  await mkdir(join(temp.path, name, 'C'), { recursive: true });
  const a = await writeSingleFileModel(join(temp.path, name, 'A', 'model.safetensors'), revisionA());
  const c = await writeSingleFileModel(join(temp.path, name, 'C', 'model.safetensors'), revisionC());
  return { a, c };
}

type Committed = BuildCommitted;

/** Slice bindings and the file stamps they carry, read from the cache itself. */
async function countBindings(cacheDir: string): Promise<{ bindings: number; stamps: number }> {
  const store = await openCacheStore(cacheDir);
  try {
    let bindings = 0;
    let stamps = 0;
    for (const entry of store.entries()) {
      for (const [, , , recorded] of entry.sliceKeys) {
        bindings++;
        stamps += recorded?.length ?? 0;
      }
    }
    return { bindings, stamps };
  } finally {
    await store.close();
  }
}

interface InspectTotals {
  entries: number;
  slices: number;
  unboundEntries: number;
  sharedShardNames?: string[];
  sharedShardUnbound?: { entries: number; shardNames: string[] };
}

async function inspectTotals(cacheDir: string): Promise<InspectTotals> {
  const inspected = await run(['inspect', cacheDir, '--json']);
  expect(inspected.code).toBe(0);
  return (JSON.parse(inspected.out) as { totals: InspectTotals }).totals;
}

describe('revisions of one layout in one cache', () => {
  it('build --rebind counts the bindings it moved from another file of the shard name (json and text)', async () => {
    const { a, c } = await writeRevisions('rebind');
    const cacheDir = join(temp.path, 'rebind', 'cache');
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const textCache = join(temp.path, 'rebind', 'cache-text');
    await cp(cacheDir, textCache, { recursive: true });

    const json = await run(['build', c, '--out', cacheDir, '--rebind', '--json']);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.out) as { rebound_other_files: number; encoded: number; tensors: { name: string; reboundFrom?: string }[] };
    expect(report.encoded).toBe(3);
    expect(report.rebound_other_files).toBe(3);
    expect(report.tensors.filter((t) => t.reboundFrom !== undefined).map((t) => t.name)).toEqual(['layers.1.weight', 'layers.2.weight', 'layers.4.weight']);

    const text = await run(['build', c, '--out', textCache, '--rebind']);
    expect(text.code).toBe(0);
    const flat = text.out.replace(/\n {8}/g, ' ');
    // The stamps cannot tell another revision's file from this model's own replaced by a new one.
    expect(flat).toContain(
      "rebound moved 3 slice bindings from another file of their shard name (another revision's or model's, whose loads now read those " +
        "tensors raw: keep revisions in caches of their own; or this model's own, before a save replaced its file with a new one)",
    );
    expect(text.out).toMatch(/layers\.1\.weight .*encoded \(moved from other file\)/);
    expect(text.out.split('\n').filter((line) => line.length > 120)).toEqual([]);
  });

  it('a --rebind of the same file rewritten in place moves no binding from another file', async () => {
    await mkdir(join(temp.path, 'in-place'), { recursive: true });
    const path = await writeSingleFileModel(join(temp.path, 'in-place', 'model.safetensors'), revisionA());
    const cacheDir = join(temp.path, 'in-place', 'cache');
    expect((await run(['build', path, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const next = await writeSingleFileModel(join(temp.path, 'in-place-next.safetensors'), revisionC());
    // The same inode, other bytes: this model's shard changed, no other revision's.
    await writeFile(path, await readFile(next));
    const json = await run(['build', path, '--out', cacheDir, '--rebind', '--json']);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.out) as { rebound_other_files: number; encoded: number; tensors: { reboundFrom?: string }[] };
    expect(report.encoded).toBe(3);
    expect(report.rebound_other_files).toBe(0);
    expect(report.tensors.every((t) => t.reboundFrom === undefined)).toBe(true);
  });

  it('a build failing SLICE_CONFLICT at a later shard says what it committed before (json and text)', async () => {
    // Shard 1 of B holds other tensors (new slice keys: stored and bound), shard 2 one tensor of
    // other bytes at A's slice: SLICE_CONFLICT once shard 1's first tensors are committed.
    const shardOne = (cols: number, seed: number): TensorData[] => Array.from({ length: 40 }, (_, i) => gaussianBf16(`early.${i}.weight`, [64, cols], seed + i));
    const maxShardBytes = 40 * 64 * 65 * 2;
    const dirA = join(temp.path, 'conflict', 'A');
    const dirB = join(temp.path, 'conflict', 'B');
    const a = await writeShardedTestModel(dirA, [...shardOne(64, 1000), gaussianBf16('late.weight', [64, 64], 7)], maxShardBytes);
    const b = await writeShardedTestModel(dirB, [...shardOne(65, 2000), gaussianBf16('late.weight', [64, 64], 8)], maxShardBytes);
    expect(a.shardPaths.length).toBe(2);
    expect(b.shardPaths.length).toBe(2);
    const cacheDir = join(temp.path, 'conflict', 'cache');
    expect((await run(['build', a.indexPath, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const textCache = join(temp.path, 'conflict', 'cache-text');
    await cp(cacheDir, textCache, { recursive: true });
    const before = await inspectTotals(cacheDir);

    const json = await run(['build', b.indexPath, '--out', cacheDir, '--json']);
    expect(json.code).toBe(1);
    const error = (JSON.parse(json.out) as { error: { code: string; message: string; committed?: Committed } }).error;
    expect(error.code).toBe('SLICE_CONFLICT');
    const after = await inspectTotals(cacheDir);
    // What the error says is what the cache gained: B's shard-1 entries, each bound to its slice.
    expect(error.committed).toBeDefined();
    expect(error.committed!.entries).toBeGreaterThan(0);
    expect(error.committed!.entries).toBe(after.entries - before.entries);
    expect(error.committed!.bindings).toBe(after.slices - before.slices);
    expect(error.committed!.bindingsRemoved).toBe(0);
    // New files of new tensors: no stamp added to a binding already there, no blob put back.
    expect(error.committed!.stampsAdded).toBe(0);
    expect(error.committed!.blobsRepaired).toBe(0);
    expect(error.message).toContain(`this build committed ${error.committed!.entries} new entries`);

    const text = await run(['build', b.indexPath, '--out', textCache, '--quiet']);
    expect(text.code).toBe(1);
    expect(text.out).toBe('');
    expect(text.err).toMatch(/^splitzip build: error: SLICE_CONFLICT: .*; the cache changed before the failure: this build committed [1-9]\d* new entries \([\d.]+ KiB\) and [1-9]\d* new slice bindings, which stay in it$/m);
  });

  it('a failed build that only added file stamps and put a blob back says so, not new entries and bindings', async () => {
    // B's first shard holds A's very bytes in a file of its own (another inode): its tensors are
    // cached, their bindings there already, and each gets B's file stamp (no new binding). One blob
    // of them is missing: put back. B's second shard conflicts at A's slice.
    const shardOne = (): TensorData[] => Array.from({ length: 40 }, (_, i) => gaussianBf16(`early.${i}.weight`, [64, 64], 3000 + i));
    const maxShardBytes = 40 * 64 * 64 * 2;
    const a = await writeShardedTestModel(join(temp.path, 'stamps', 'A'), [...shardOne(), gaussianBf16('late.weight', [64, 64], 7)], maxShardBytes);
    const b = await writeShardedTestModel(join(temp.path, 'stamps', 'B'), [...shardOne(), gaussianBf16('late.weight', [64, 64], 8)], maxShardBytes);
    expect(a.shardPaths.length).toBe(2);
    const cacheDir = join(temp.path, 'stamps', 'cache');
    const built = await run(['build', a.indexPath, '--out', cacheDir, '--json']);
    expect(built.code).toBe(0);
    const firstKey = (JSON.parse(built.out) as { tensors: { name: string; key: string }[] }).tensors.find((t) => t.name === 'early.0.weight')!.key;
    const blob = join(cacheDir, 'blobs', `${firstKey}.bin`);
    await rm(blob);
    const textCache = join(temp.path, 'stamps', 'cache-text');
    await cp(cacheDir, textCache, { recursive: true });
    const before = await countBindings(cacheDir);

    const json = await run(['build', b.indexPath, '--out', cacheDir, '--json']);
    expect(json.code).toBe(1);
    const error = (JSON.parse(json.out) as { error: { code: string; message: string; committed?: Committed } }).error;
    expect(error.code).toBe('SLICE_CONFLICT');
    const after = await countBindings(cacheDir);
    const putBack = await access(blob).then(
      () => 1,
      () => 0,
    );
    // What the error says is what the cache got: no entry, no binding; stamps, and the blob where put back.
    expect(after.bindings).toBe(before.bindings);
    expect(after.stamps).toBeGreaterThan(before.stamps);
    expect(error.committed).toMatchObject({ entries: 0, storedBytes: 0, bindings: 0, bindingsRemoved: 0, stampsAdded: after.stamps - before.stamps, blobsRepaired: putBack });
    expect(error.committed!.repairedBytes > 0).toBe(putBack === 1);
    const stamps = after.stamps - before.stamps;
    expect(error.message).toContain(`this build committed ${stamps === 1 ? 'a file stamp on 1 slice binding' : `file stamps on ${stamps} slice bindings`} already there (no new binding)`);
    expect(error.message).not.toMatch(/new entr|new slice binding/);

    const text = await run(['build', b.indexPath, '--out', textCache, '--quiet']);
    expect(text.code).toBe(1);
    expect(text.err).toMatch(
      /; the cache changed before the failure: this build committed (a file stamp on 1 slice binding|file stamps on [1-9]\d* slice bindings) already there \(no new binding\)( and 1 blob put back \([\d.]+ KiB\))?, which stay in it$/m,
    );
  });

  it("inspect's unbound line warns where bindings of a shard name were recorded with more than one file", async () => {
    const { a, c } = await writeRevisions('inspect');
    const cacheDir = join(temp.path, 'inspect', 'cache');
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    expect((await run(['build', c, '--out', cacheDir, '--rebind', '--quiet'])).code).toBe(0);
    // An unbound entry of no tensor bound at that shard name: another model's shard of its own name,
    // rewritten in place and rebuilt (its old tensor unbound). Not counted in the caution.
    const extra = await writeSingleFileModel(join(temp.path, 'inspect', 'extra.safetensors'), [gaussianBf16('extra.weight', [64, 64], 50)]);
    expect((await run(['build', extra, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const next = await writeSingleFileModel(join(temp.path, 'inspect', 'extra-next.safetensors'), [gaussianBf16('extra.weight', [64, 64], 51)]);
    await writeFile(extra, await readFile(next));
    expect((await run(['build', extra, '--out', cacheDir, '--rebind', '--quiet'])).code).toBe(0);
    const totals = await inspectTotals(cacheDir);
    // A's three tensors C's --rebind took the slices of: unbound, and still A's; and the extra one.
    expect(totals.unboundEntries).toBe(4);
    expect(totals.sharedShardNames).toEqual(['model.safetensors']);
    expect(totals.sharedShardUnbound).toEqual({ entries: 3, shardNames: ['model.safetensors'] });
    const text = await run(['inspect', cacheDir]);
    expect(text.code).toBe(0);
    const flat = text.out.replace(/\n {6}/g, ' ');
    expect(flat).toContain(
      '  but 3 of them match a tensor (name and shape) bound at shard name model.safetensors, whose bindings were recorded with more ' +
        "than one file: they may be another revision's or model's tensors whose slices a --rebind moved (its loads read them raw, hashing " +
        'each; its build --rebind binds them again without encoding; dropped, that build encodes them again), or this model\'s own from ' +
        'before a save replaced its file with a new one, which nothing loads',
    );
    expect(text.out.split('\n').filter((line) => line.length > 120)).toEqual([]);

    // One file only (rewritten in place, then rebuilt): unbound entries, no such warning.
    await mkdir(join(temp.path, 'inspect-one'), { recursive: true });
    const path = await writeSingleFileModel(join(temp.path, 'inspect-one', 'model.safetensors'), revisionA());
    const oneCache = join(temp.path, 'inspect-one', 'cache');
    expect((await run(['build', path, '--out', oneCache, '--quiet'])).code).toBe(0);
    await writeFile(path, await readFile(c));
    expect((await run(['build', path, '--out', oneCache, '--rebind', '--quiet'])).code).toBe(0);
    const one = await inspectTotals(oneCache);
    expect(one.unboundEntries).toBe(3);
    expect(one.sharedShardNames).toEqual([]);
    expect(one.sharedShardUnbound).toEqual({ entries: 0, shardNames: [] });
    expect((await run(['inspect', oneCache])).out).not.toContain('recorded with more than one file');
  });
});
