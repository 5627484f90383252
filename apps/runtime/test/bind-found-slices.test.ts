// A tensor whose slice has no binding but whose bytes an entry holds (the cache was built from
// other shard names: a renamed or re-sharded copy of the model) is bound by the load that finds it,
// so later loads serve it from the cache; the runtime bound nothing before, and every load read and
// hashed every such tensor again until a build bound them. And a cache this process cannot write
// says so in the reports, where they said a stamp "is being recorded" that never was.
import { spawnSync } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isRuntimeError } from '../src/errors.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, tunedWeights, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('bind-found'));
});
afterAll(async () => {
  await cleanup?.();
});

const tensors = () => tunedWeights(['a', 'b', 'c'], 31);

it('a renamed copy of the model: the first load binds each slice it finds cached, the next is served from the cache without hashing', async () => {
  const base = await writeModel(join(root, 'base'), tensors(), 1 << 20, 'model');
  const cacheDir = join(root, 'cache');
  await buildCache(base, cacheDir);
  await base.close();
  const renamed = await writeModel(join(root, 'renamed'), tensors(), 1 << 20, 'other');
  const raw = await readAllRaw(renamed);
  try {
    const first = await openShardCache(cacheDir);
    const load = loadModel(renamed, first, { backend: 'cpu' });
    for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!)).toBe(true);
    expect(load.totals.fromCache).toBe(0);
    for (const report of load.reports) {
      expect(report, report.name).toMatchObject({ source: 'raw', reason: 'missing' });
      expect(report.detail, report.name).toMatch(/holds these bytes, but this slice was not bound to it .*: bound now: .*the binding is being recorded for other processes$/);
    }
    // Through the same handle at once (remembered), and for other processes once recorded.
    const again = loadModel(renamed, first, { backend: 'cpu' });
    expect((await again.drain()).fromCache).toBe(3);
    expect((await first.flushObjectStamps!()).recorded).toBe(3);
    await first.close();
    const second = await openShardCache(cacheDir);
    try {
      const later = loadModel(renamed, second, { backend: 'cpu' });
      for await (const tensor of later) expect(sameBytes(tensor.data, raw.get(tensor.name)!)).toBe(true);
      expect(later.totals.fromCache).toBe(3);
      expect(later.totals.digestMs).toBe(0); // nothing hashed: found by slice
    } finally {
      await second.close();
    }
  } finally {
    await renamed.close();
  }
});

it("bytes cached under another tensor's name are not bound: another model's load must not change what a bare slice of this one is served", async () => {
  const tensorsA = tensors();
  const modelA = await writeModel(join(root, 'named-a'), tensorsA, 1 << 20, 'model');
  const cacheDir = join(root, 'named-cache');
  await buildCache(modelA, cacheDir, { skip: ['a.weight'] });
  const sliceA = modelA.tensors.find((t) => t.name === 'a.weight')!.slice;
  // Model B: the same names and layout, its a.weight holding A's c.weight bytes (cached as c.weight).
  const modelB = await writeModel(join(root, 'named-b'), tensorsA.map((t) => (t.name === 'a.weight' ? { ...t, data: tensorsA[2]!.data } : t)), 1 << 20, 'model');
  const cache = await openShardCache(cacheDir);
  try {
    const load = loadModel(modelB, cache, { backend: 'cpu' });
    await load.drain();
    expect(load.reports.find((r) => r.name === 'a.weight')?.detail).toMatch(/holds these bytes, but this slice was not bound to it .*: a build of this model binds it$/);
    await cache.flushObjectStamps!(); // b and c: their stamps recorded (unchecked, the entry's bytes)
    expect(cache.lookupBySlice(sliceA.shardName, sliceA.offsetBytes, sliceA.sizeBytes)).toBeUndefined();
    const bare = await loadTensor(sliceA, { cache, backend: 'cpu' }).then(() => 'served', (error: unknown) => (isRuntimeError(error) ? error.code : String(error)));
    expect(bare).toBe('SLICE_NOT_FOUND');
  } finally {
    await cache.close();
    await modelA.close();
    await modelB.close();
  }
});

it('a cache this process cannot write: the reports say the binding cannot be recorded and why, every tensor still served right', async () => {
  const dir = join(root, 'unwritable');
  const base = await writeModel(join(dir, 'base'), tensors(), 1 << 20, 'model');
  const cacheDir = join(dir, 'cache');
  await buildCache(base, cacheDir);
  await base.close();
  await (await writeModel(join(dir, 'renamed'), tensors(), 1 << 20, 'other')).close();
  // The same shard names, other files: bound slices whose stamps the bindings have no record of.
  await (await writeModel(join(dir, 'copy'), tensors(), 1 << 20, 'model')).close();
  // Readable by all, written by none but the owner (root, who writes anyway: the check runs as nobody then).
  for (const path of [root, dir, cacheDir]) await chmod(path, 0o755);
  await chmod(cacheDir, 0o555);
  const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  const script = `
    import { openSafetensorsModel } from '@splitzip/safetensors';
    import { loadModel, openShardCache } from ${JSON.stringify(entry)};
    const cache = await openShardCache(${JSON.stringify(cacheDir)});
    const seen = {};
    for (const name of ['renamed', 'copy']) {
      const model = await openSafetensorsModel(${JSON.stringify(dir)} + '/' + name);
      const load = loadModel(model, cache, { backend: 'cpu' });
      await load.drain();
      seen[name] = { details: load.reports.map((r) => r.detail), fromRaw: load.totals.fromRaw };
      await model.close();
    }
    seen.recorded = (await cache.flushObjectStamps()).recorded;
    console.log(JSON.stringify(seen));
    await cache.close();
  `;
  const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000, cwd: fileURLToPath(new URL('..', import.meta.url)), ...asNobody });
  await chmod(cacheDir, 0o755);
  expect(result.stderr).toBe('');
  const seen = JSON.parse(result.stdout) as Record<'renamed' | 'copy', { details: string[]; fromRaw: number }> & { recorded: number };
  expect(seen.recorded).toBe(0);
  expect(seen.renamed.fromRaw).toBe(3);
  for (const detail of seen.renamed.details) expect(detail).toMatch(/bound now: .*the binding cannot be recorded: this process cannot write the cache \((EACCES|EROFS|EPERM)\), so every new process checks it again/);
  expect(seen.copy.fromRaw).toBe(3);
  for (const detail of seen.copy.details) expect(detail).toMatch(/checked: its bytes are the entry's; .*its stamp cannot be recorded: this process cannot write the cache \((EACCES|EROFS|EPERM)\)/);
});

it("a record another writer's binding overtook (the slice bound to another entry since the check) is left to it: neither recorded nor failed, no SLICE_CONFLICT in later reports", async () => {
  const base = await writeModel(join(root, 'overtaken-base'), tensors(), 1 << 20, 'model');
  const cacheDir = join(root, 'overtaken-cache');
  const keys = await buildCache(base, cacheDir);
  await base.close();
  const renamed = await writeModel(join(root, 'overtaken'), tensors(), 1 << 20, 'other');
  const raw = await readAllRaw(renamed);
  const cache = await openShardCache(cacheDir);
  const other = await openShardCache(cacheDir);
  // The records wait until another writer has bound a.weight's slice to b's entry (a build of
  // another model of these shard names, say); then they go on.
  let release!: () => void;
  const overtaken = new Promise<void>((resolve) => (release = resolve));
  const aliasSlices = cache.store.aliasSlices.bind(cache.store);
  cache.store.aliasSlices = async (items, options) => {
    await overtaken;
    return aliasSlices(items, options);
  };
  try {
    const load = loadModel(renamed, cache, { backend: 'cpu' });
    for await (const tensor of load) expect(sameBytes(tensor.data, raw.get(tensor.name)!)).toBe(true);
    const a = renamed.getTensor('a.weight')!.slice;
    expect(await other.store.aliasSlices([{ key: keys.get('b.weight')!, shardName: a.shardName, offsetBytes: a.offsetBytes, sizeBytes: a.sizeBytes }])).toEqual([true]);
    release();
    const stats = await cache.flushObjectStamps!();
    expect(stats).toMatchObject({ recorded: 2, failed: 0 });
    expect(stats.lastError).toBeUndefined();
    await other.store.refresh();
    expect(other.store.lookupBySlice(a.shardName, a.offsetBytes, a.sizeBytes)?.key).toBe(keys.get('b.weight'));
  } finally {
    release();
    await Promise.all([cache.close(), other.close()]);
    await renamed.close();
  }
});
