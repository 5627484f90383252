// The user probe behind one binding per file (packages/store/FILE-BINDINGS.md): revisions A, B (A
// with 3 tensors changed, one of them resized, so the tensors after it in its shard move) and C (A
// with 10 of 19 changed) of one model, plain directories with the same shard names, built into one
// cache. Before 0.56 B's build failed SLICE_CONFLICT without --rebind, and with it each revision took
// the slices from the one before (A 9 of 19 served from the cache, B 12). Now every build succeeds
// without --rebind and binds each revision's tensors for its own file: a load of each, stamping its
// file as it is, finds every tensor's binding and an entry holding its very bytes.
import { copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decode } from '@splitzip/codec';
import { openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';
import { computeContentKey, openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildCommitted, BuildReport } from '../src/build-cache.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-build-revisions-');
});
afterAll(async () => temp?.cleanup());

const COUNT = 19;
const SHAPE = [64, 64];
// Two shards (10 and 9 tensors of 8 KiB).
const MAX_SHARD_BYTES = 10 * 8192 + 4096;
const revisionA = (): TensorData[] => Array.from({ length: COUNT }, (_, i) => gaussianBf16(`layers.${i}.weight`, SHAPE, 100 + i));
/** 3 changed: layers.2 resized (layers.3-9 move within shard 1), layers.5 and layers.12 other bytes. */
const revisionB = (): TensorData[] =>
  revisionA().map((tensor, i) =>
    i === 2 ? gaussianBf16(tensor.name, [60, 64], 200 + i) : i === 5 || i === 12 ? gaussianBf16(tensor.name, SHAPE, 200 + i) : tensor,
  );
/** 10 of 19 other bytes, same layout as A. */
const CHANGED_IN_C = [0, 1, 3, 4, 7, 9, 10, 13, 15, 18];
const revisionC = (): TensorData[] => revisionA().map((tensor, i) => (CHANGED_IN_C.includes(i) ? gaussianBf16(tensor.name, SHAPE, 300 + i) : tensor));

/** The slice of the model's only tensor. */
async function sliceOf(model: string): Promise<{ offsetBytes: number }> {
  const opened = await openSafetensorsModel(model);
  try {
    return { offsetBytes: opened.tensors[0]!.slice.offsetBytes };
  } finally {
    await opened.close();
  }
}

/** For each tensor of `model`: bound for this very file (its stamp) to an entry whose blob decodes to the file's bytes. */
async function checkServedFromCache(cacheDir: string, model: string): Promise<{ bound: number; exact: number }> {
  const opened = await openSafetensorsModel(model);
  const store = await openCacheStore(cacheDir);
  try {
    let bound = 0;
    let exact = 0;
    for (const tensor of opened.tensors) {
      const { shardName, offsetBytes, sizeBytes } = tensor.slice;
      const stamp = opened.shards.find((shard) => shard.name === shardName)!.stamp!;
      const binding = store.lookupSliceBinding(shardName, offsetBytes, sizeBytes, stamp);
      const bytes = await readTensorBytes(opened, tensor);
      if (binding === undefined || !binding.stamps.includes(stamp) || binding.entry.key !== computeContentKey(bytes, tensor.shape, 'BF16')) continue;
      bound++;
      const payload = await store.readBlob(binding.entry.key, new Uint8Array(binding.entry.compBytes));
      const decoded = decode(payload);
      if (Buffer.compare(Buffer.from(decoded.buffer, decoded.byteOffset, decoded.byteLength), Buffer.from(bytes)) === 0) exact++;
    }
    return { bound, exact };
  } finally {
    await store.close();
    await opened.close();
  }
}

describe('revisions A, B, C of one model (same shard names) in one directory cache', () => {
  it('each builds without --rebind, and each has all 19 tensors bound for its own file, bit-exact', async () => {
    const root = join(temp.path, 'probe');
    const models: Record<string, string> = {};
    for (const [name, tensors] of [['A', revisionA()], ['B', revisionB()], ['C', revisionC()]] as const) {
      await mkdir(join(root, name), { recursive: true });
      models[name] = (await writeShardedTestModel(join(root, name), tensors, MAX_SHARD_BYTES)).indexPath;
    }
    const cacheDir = join(root, 'cache');
    const reports: Record<string, BuildReport> = {};
    for (const name of ['A', 'B', 'C']) {
      const built = await run(['build', models[name]!, '--out', cacheDir, '--json']);
      expect(built.code, built.out + built.err).toBe(0);
      reports[name] = JSON.parse(built.out) as BuildReport;
    }
    expect(reports.A!.tensors.map((t) => t.shard)).toEqual(reports.B!.tensors.map((t) => t.shard));
    expect(reports.A).toMatchObject({ encoded: COUNT, rebound_other_files: 0, dropped_bindings: 0, cache_format_moved: false });
    // B: its 3 changed tensors are new entries; its moved ones and the rest are A's entries, bound for B's file too.
    expect(reports.B).toMatchObject({ encoded: 3, cached: COUNT - 3, aliased: COUNT, rebound_other_files: 0, dropped_bindings: 0, cache_format_moved: true });
    expect(reports.C).toMatchObject({ encoded: 10, cached: COUNT - 10, rebound_other_files: 0, dropped_bindings: 0, cache_format_moved: false });
    for (const name of ['A', 'B', 'C']) {
      expect(await checkServedFromCache(cacheDir, models[name]!), name).toEqual({ bound: COUNT, exact: COUNT });
    }
    // A rebuild of A (nothing changed) writes nothing: its bindings are all there.
    const again = await run(['build', models.A!, '--out', cacheDir, '--json']);
    expect(JSON.parse(again.out)).toMatchObject({ encoded: 0, aliased: 0, stored_bytes: 0 });
  });

  it('the build that first binds a slice for a second file says the cache format moved (text)', async () => {
    const root = join(temp.path, 'text');
    const a = (await writeShardedTestModel(join(root, 'A'), revisionA(), MAX_SHARD_BYTES)).indexPath;
    const b = (await writeShardedTestModel(join(root, 'B'), revisionB(), MAX_SHARD_BYTES)).indexPath;
    const cacheDir = join(root, 'cache');
    const first = await run(['build', a, '--out', cacheDir, '--quiet']);
    expect(first.out).not.toContain('format  ');
    const second = await run(['build', b, '--out', cacheDir, '--quiet']);
    expect(second.code, second.err).toBe(0);
    expect(second.err).toBe('');
    const flat = second.out.replace(/\n {8}/g, ' ');
    expect(flat).toContain('format  the cache now binds a slice for more than one file (revisions side by side): it is written as manifest format 3, which releases before 0.56 can no longer read (UNSUPPORTED_FORMAT)');
    expect(second.out.split('\n').filter((line) => line.length > 120)).toEqual([]);
  });

  it("a file rewritten in place is still refused (SLICE_CONFLICT) where its own binding holds other bytes; --rebind moves that one only, another revision's stays", async () => {
    const root = join(temp.path, 'in-place');
    await mkdir(join(root, 'A'), { recursive: true });
    await mkdir(join(root, 'B'), { recursive: true });
    const a = await writeSingleFileModel(join(root, 'A', 'model.safetensors'), revisionA().slice(0, 4));
    const b = await writeSingleFileModel(join(root, 'B', 'model.safetensors'), revisionC().slice(0, 4));
    const cacheDir = join(root, 'cache');
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    expect((await run(['build', b, '--out', cacheDir, '--quiet'])).code).toBe(0);
    // B rewritten in place (the same inode): layers.0 new bytes where B's own binding (C's bytes) is
    // in the way, layers.1 back to A's bytes, layers.2 new bytes where A's binding (recorded with B
    // too) is A's, layers.3 unchanged.
    const next = await writeSingleFileModel(join(root, 'next.safetensors'), [
      gaussianBf16('layers.0.weight', SHAPE, 998),
      revisionA()[1]!,
      gaussianBf16('layers.2.weight', SHAPE, 999),
      revisionC()[3]!,
    ]);
    await writeFile(b, await readFile(next));
    const refused = await run(['build', b, '--out', cacheDir, '--json']);
    expect(refused.code).toBe(1);
    const error = (JSON.parse(refused.out) as { error: { code: string; message: string; committed?: BuildCommitted } }).error;
    expect(error.code).toBe('SLICE_CONFLICT');
    expect(error.message).toContain("recorded with a file stamp of this file's inode number");
    expect(error.message).toContain('this very file before it changed in place, or another file with the same inode number on another file system');
    expect(error.message).toContain('pass --rebind, which moves the slice to this tensor');
    // The build works on several tensors at once and commits each as it is done: layers.2's new
    // entry (nothing in its way) may be committed before layers.0 is refused, or not, as the two
    // race. It stays, and the error says so (`committed`); the --rebind then finds it cached.
    const committedEntries = error.committed?.entries ?? 0;
    expect([0, 1]).toContain(committedEntries);
    const rebound = await run(['build', b, '--out', cacheDir, '--rebind', '--json']);
    expect(rebound.code, rebound.err).toBe(0);
    expect(JSON.parse(rebound.out)).toMatchObject({ encoded: 2 - committedEntries, cached: 2 + committedEntries, rebound_other_files: 0, cache_format_moved: false });
    const store = await openCacheStore(cacheDir);
    try {
      const opened = await openSafetensorsModel(a);
      const slices = opened.tensors.map((t) => t.slice);
      await opened.close();
      const keysAt = (i: number): string[] => store.lookupSliceBindings(slices[i]!.shardName, slices[i]!.offsetBytes, slices[i]!.sizeBytes).map((binding) => binding.entry.qualname + ':' + binding.stamps.length);
      // layers.0: A's binding and B's new one; B's stale one (C's bytes) gone.
      expect(keysAt(0)).toHaveLength(2);
      expect(keysAt(0)).toContain('layers.0.weight:1');
      // layers.1: B's stamp added to A's binding, B's stale one gone.
      expect(keysAt(1)).toEqual(['layers.1.weight:2']);
      // layers.2: A's binding (with B's old stamp) kept beside B's new one; layers.3: A's and B's, as before.
      expect(keysAt(2)).toHaveLength(2);
      expect(keysAt(3)).toHaveLength(2);
    } finally {
      await store.close();
    }
    for (const model of [a, b]) expect(await checkServedFromCache(cacheDir, model)).toEqual({ bound: 4, exact: 4 });
  });

  it('a ninth file of one slice drops the least recent binding, and the build reports it (json and text)', async () => {
    const root = join(temp.path, 'nine');
    const cacheDir = join(root, 'cache');
    const files: string[] = [];
    for (let i = 0; i < 9; i++) {
      await mkdir(join(root, `r${i}`), { recursive: true });
      files.push(await writeSingleFileModel(join(root, `r${i}`, 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 500 + i)]));
    }
    for (const file of files.slice(0, 8)) expect(JSON.parse((await run(['build', file, '--out', cacheDir, '--json'])).out)).toMatchObject({ dropped_bindings: 0 });
    const ninth = await run(['build', files[8]!, '--out', cacheDir, '--json']);
    expect(JSON.parse(ninth.out)).toMatchObject({ encoded: 1, dropped_bindings: 1 });
    // One earlier file's binding went (the least recent by file ctime; files written within one
    // clock tick tie, broken by key); r8's and the seven others' stay, each bit-exact.
    const served = await Promise.all(files.map((file) => checkServedFromCache(cacheDir, file)));
    expect(served[8]).toEqual({ bound: 1, exact: 1 });
    expect(served.filter((one) => one.bound === 0)).toHaveLength(1);
    expect(served.filter((one) => one.bound === 1 && one.exact === 1)).toHaveLength(8);
    await mkdir(join(root, 'r9'), { recursive: true });
    const tenth = await writeSingleFileModel(join(root, 'r9', 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 600)]);
    const text = await run(['build', tenth, '--out', cacheDir, '--quiet']);
    expect(text.out.replace(/\n {8}/g, ' ')).toContain('dropped 1 slice binding (a slice keeps 8, one per file; the least recent went): 1 of other files');
  });

  it('a file that changed less recently than the 8 bound is left unbound for it (dropped, exit 0), entry stored or cached', async () => {
    // The store answers such an alias false and reports the drop with the new key ('outranked');
    // the build read that false as its entry vanished, tried again and failed NOT_WRITABLE.
    const root = join(temp.path, 'outranked');
    const cacheDir = join(root, 'cache');
    const files: string[] = [];
    for (let i = 0; i < 9; i++) {
      await mkdir(join(root, `r${i}`), { recursive: true });
      files.push(await writeSingleFileModel(join(root, `r${i}`, 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 700 + i)]));
      // r0 is written first: its ctime is the oldest (a pause, so that no clock tick ties it with r1).
      if (i === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    for (const file of files.slice(1)) expect((await run(['build', file, '--out', cacheDir, '--quiet'])).code).toBe(0);
    // Encoded: the store adds the entry without the slice (AddEntryResult.droppedBindings).
    const first = await run(['build', files[0]!, '--out', cacheDir, '--json']);
    expect(first.code).toBe(0);
    const report = JSON.parse(first.out) as BuildReport;
    expect(report).toMatchObject({ encoded: 1, aliased: 0, dropped_bindings: 1 });
    expect(report.tensors[0]).toMatchObject({ status: 'encoded', bindingDropped: true });
    // Cached: the alias is outranked (aliasSlices false, onBindingDropped with its key).
    const again = await run(['build', files[0]!, '--out', cacheDir, '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out)).toMatchObject({ encoded: 0, cached: 1, aliased: 0, dropped_bindings: 1, tensors: [{ status: 'cached', bindingDropped: true }] });
    const text = await run(['build', files[0]!, '--out', cacheDir]);
    expect(text.code).toBe(0);
    expect(text.out).toContain('cached, unbound (binding dropped)');
    expect(text.out.replace(/\n {8}/g, ' ')).toContain('dropped 1 slice binding (a slice keeps 8, one per file; the least recent went): 1 of this file (it changed less recently than the 8 files bound: its loads hash that tensor and find it by content key)');
    expect(text.out).not.toContain('of other files');
    // The 8 newer files keep theirs, bit-exact; r0's tensor is in the cache by content key.
    const served = await Promise.all(files.map((file) => checkServedFromCache(cacheDir, file)));
    expect(served[0]).toEqual({ bound: 0, exact: 0 });
    expect(served.slice(1).every((one) => one.bound === 1 && one.exact === 1)).toBe(true);
    expect(report.tensors[0]!.key).toMatch(/^[0-9a-f]{40}$/);
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.getEntry(report.tensors[0]!.key!)).toBeDefined();
    } finally {
      await store.close();
    }
  });

  it('--rebind of a file rewritten in place at MAX_SLICE_BINDINGS moves its stale binding in one op: no live binding dropped, the format kept', async () => {
    // It bound beside the stale binding first (a ninth: the least recent file's live binding went,
    // dropped_bindings 1) and unbound the stale one after; a cache of that file alone went to format
    // 3 and back meanwhile.
    const root = join(temp.path, 'capacity');
    const cacheDir = join(root, 'cache');
    const files: string[] = [];
    for (let i = 0; i < 8; i++) {
      await mkdir(join(root, `r${i}`), { recursive: true });
      files.push(await writeSingleFileModel(join(root, `r${i}`, 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 800 + i)]));
      expect((await run(['build', files[i]!, '--out', cacheDir, '--quiet'])).code).toBe(0);
    }
    const last = files[7]!;
    const inode = (await stat(last)).ino;
    await writeFile(last, await readFile(await writeSingleFileModel(join(root, 'next.safetensors'), [gaussianBf16('w.weight', SHAPE, 899)])));
    expect((await stat(last)).ino).toBe(inode);
    const rebound = await run(['build', last, '--out', cacheDir, '--rebind', '--json']);
    expect(rebound.code, rebound.err).toBe(0);
    expect(JSON.parse(rebound.out)).toMatchObject({ encoded: 1, aliased: 1, dropped_bindings: 0, cache_format_moved: false });
    const served = await Promise.all(files.map((file) => checkServedFromCache(cacheDir, file)));
    expect(served).toEqual(files.map(() => ({ bound: 1, exact: 1 })));
    const store = await openCacheStore(cacheDir);
    try {
      expect(store.lookupSliceBindings('model.safetensors', (await sliceOf(last)).offsetBytes, 8192)).toHaveLength(8);
    } finally {
      await store.close();
    }
    // A cache of one file: rewritten in place and rebound, it never holds a second binding (format 2).
    const alone = join(root, 'alone');
    await mkdir(alone, { recursive: true });
    const single = await writeSingleFileModel(join(alone, 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 850)]);
    const aloneCache = join(alone, 'cache');
    expect((await run(['build', single, '--out', aloneCache, '--quiet'])).code).toBe(0);
    await writeFile(single, await readFile(await writeSingleFileModel(join(alone, 'next.safetensors'), [gaussianBf16('w.weight', SHAPE, 851)])));
    const one = await run(['build', single, '--out', aloneCache, '--rebind', '--json']);
    expect(JSON.parse(one.out)).toMatchObject({ encoded: 1, cache_format_moved: false, dropped_bindings: 0 });
    expect((JSON.parse(await readFile(join(aloneCache, 'manifest.json'), 'utf8')) as { format: number }).format).toBe(2);
  });

  it("a plain build of a file overwritten in place with another file's bytes removes its own stale binding beside (unbound_stale)", async () => {
    const root = join(temp.path, 'cp-over');
    await mkdir(join(root, 'A'), { recursive: true });
    await mkdir(join(root, 'B'), { recursive: true });
    const a = await writeSingleFileModel(join(root, 'A', 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 901)]);
    const b = await writeSingleFileModel(join(root, 'B', 'model.safetensors'), [gaussianBf16('w.weight', SHAPE, 902)]);
    const cacheDir = join(root, 'cache');
    for (const model of [a, b]) expect((await run(['build', model, '--out', cacheDir, '--quiet'])).code).toBe(0);
    const inode = (await stat(a)).ino;
    await copyFile(b, a); // cp onto an existing file writes in place: the same inode
    expect((await stat(a)).ino).toBe(inode);
    const plain = await run(['build', a, '--out', cacheDir, '--json']);
    expect(plain.code, plain.err).toBe(0);
    const report = JSON.parse(plain.out) as BuildReport;
    expect(report).toMatchObject({ unbound_stale: 1 });
    expect(report.tensors[0]!.unboundFrom).toMatch(/^[0-9a-f]{40}$/);
    const store = await openCacheStore(cacheDir);
    try {
      const { offsetBytes } = await sliceOf(a);
      const bindings = store.lookupSliceBindings('model.safetensors', offsetBytes, 8192);
      expect(bindings).toHaveLength(1);
      expect(bindings[0]!.entry.key).not.toBe(report.tensors[0]!.unboundFrom);
    } finally {
      await store.close();
    }
    expect(await checkServedFromCache(cacheDir, a)).toEqual({ bound: 1, exact: 1 });
    expect(await checkServedFromCache(cacheDir, b)).toEqual({ bound: 1, exact: 1 });
    // The text says so (not as a skipped tensor's).
    await writeSingleFileModel(a, [gaussianBf16('w.weight', SHAPE, 901)]);
    expect((await run(['build', a, '--out', cacheDir, '--quiet'])).code).toBe(0);
    await copyFile(b, a);
    const text = await run(['build', a, '--out', cacheDir, '--quiet']);
    expect(text.out.replace(/\n {8}/g, ' ')).toContain('1 stale binding of this file (before it changed in place) to other bytes removed from beside its tensor');
    expect(text.out).not.toContain('skipped tensor');
  });
});
