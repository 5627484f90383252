// Revisions of one model (same shard names, same layout) kept in one cache (user probe p3): what the
// builder reports must say how the cache changed. Since 0.56 a directory cache binds a slice once per
// file: a --rebind of another revision moves none of its bindings (rebound_other_files 0, no line);
// a build failing SLICE_CONFLICT part-way (its own file rewritten in place) says what it committed
// before; inspect's unbound line counts only entries no file binds.
import { access, cp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
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

/** Rewrites each file of `from` over the file of that name in `into`, in place (the same inodes). */
async function rewriteInPlace(from: string, into: string): Promise<void> {
  for (const name of await readdir(from)) await writeFile(join(into, name), await readFile(join(from, name)));
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
  it("build --rebind of another revision moves none of its bindings: C's go beside A's (json and text; it moved 3 before 0.56)", async () => {
    const { a, c } = await writeRevisions('rebind');
    const cacheDir = join(temp.path, 'rebind', 'cache');
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const textCache = join(temp.path, 'rebind', 'cache-text');
    await cp(cacheDir, textCache, { recursive: true });

    const json = await run(['build', c, '--out', cacheDir, '--rebind', '--json']);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.out) as { rebound_other_files: number; encoded: number; tensors: { name: string; reboundFrom?: string }[] };
    expect(report.encoded).toBe(3);
    expect(report.rebound_other_files).toBe(0);
    expect(report.tensors.filter((t) => t.reboundFrom !== undefined)).toEqual([]);
    // A's five bindings stay; C's three new tensors bound beside them; C's stamp on A's other two.
    expect(await countBindings(cacheDir)).toEqual({ bindings: 8, stamps: 10 });

    const text = await run(['build', c, '--out', textCache, '--rebind']);
    expect(text.code).toBe(0);
    expect(text.out).not.toContain('rebound');
    expect(text.out).not.toContain('moved from other file');
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
    // A's files rewritten in place with B's: shard 1 holds other tensors (new slice keys: stored and
    // bound), shard 2 one tensor of other bytes at A's slice, this very file's binding (its inode):
    // SLICE_CONFLICT once shard 1's first tensors are committed. (B's files of their own bind beside A's.)
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

    await rewriteInPlace(dirB, dirA);
    const json = await run(['build', a.indexPath, '--out', cacheDir, '--json']);
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

    const text = await run(['build', a.indexPath, '--out', textCache, '--quiet']);
    expect(text.code).toBe(1);
    expect(text.out).toBe('');
    expect(text.err).toMatch(/^splitzip build: error: SLICE_CONFLICT: .*; the cache changed before the failure: this build committed [1-9]\d* new entries \([\d.]+ KiB\) and [1-9]\d* new slice bindings, which stay in it$/m);
  });

  it('a failed build that only added file stamps and put a blob back says so, not new entries and bindings', async () => {
    // A's files rewritten in place with B's: the first shard holds A's very bytes (a new stamp of the
    // same file): its tensors are cached, their bindings there already, and each gets the file's new
    // stamp (no new binding). One blob of them is missing: put back. The second shard conflicts at
    // this very file's slice (other bytes).
    const shardOne = (): TensorData[] => Array.from({ length: 40 }, (_, i) => gaussianBf16(`early.${i}.weight`, [64, 64], 3000 + i));
    const maxShardBytes = 40 * 64 * 64 * 2;
    const a = await writeShardedTestModel(join(temp.path, 'stamps', 'A'), [...shardOne(), gaussianBf16('late.weight', [64, 64], 7)], maxShardBytes);
    const b = await writeShardedTestModel(join(temp.path, 'stamps', 'B'), [...shardOne(), gaussianBf16('late.weight', [64, 64], 8)], maxShardBytes);
    expect(a.shardPaths.length).toBe(2);
    expect(b.shardPaths.length).toBe(2);
    const cacheDir = join(temp.path, 'stamps', 'cache');
    const built = await run(['build', a.indexPath, '--out', cacheDir, '--json']);
    expect(built.code).toBe(0);
    const firstKey = (JSON.parse(built.out) as { tensors: { name: string; key: string }[] }).tensors.find((t) => t.name === 'early.0.weight')!.key;
    const blob = join(cacheDir, 'blobs', `${firstKey}.bin`);
    await rm(blob);
    const textCache = join(temp.path, 'stamps', 'cache-text');
    await cp(cacheDir, textCache, { recursive: true });
    const before = await countBindings(cacheDir);

    await rewriteInPlace(join(temp.path, 'stamps', 'B'), join(temp.path, 'stamps', 'A'));
    const json = await run(['build', a.indexPath, '--out', cacheDir, '--json']);
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
    expect(error.message).toContain(`this build committed ${stamps === 1 ? 'a stamp on 1 slice binding' : `stamps on ${stamps} slice bindings`} already there (no new binding)`);
    expect(error.message).not.toMatch(/new entr|new slice binding/);

    const text = await run(['build', a.indexPath, '--out', textCache, '--quiet']);
    expect(text.code).toBe(1);
    expect(text.err).toMatch(
      /; the cache changed before the failure: this build committed (a stamp on 1 slice binding|stamps on [1-9]\d* slice bindings) already there \(no new binding\)( and 1 blob put back \([\d.]+ KiB\))?, which stay in it$/m,
    );
  });

  it("inspect's unbound line: another revision built with --rebind leaves no entry unbound (0.56); a file rewritten in place does, with no caution", async () => {
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
    // A's three tensors C differs at keep their bindings beside C's (before 0.56 C's --rebind took
    // them, leaving A's entries unbound): only the extra one is unbound.
    expect(totals.unboundEntries).toBe(1);
    expect(totals.sharedShardUnbound).toEqual({ entries: 0, shardNames: [] });
    const text = await run(['inspect', cacheDir]);
    expect(text.code).toBe(0);
    expect(text.out.replace(/\n {6}/g, ' ')).not.toContain('but 3 of them match');
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
