// Loads after `splitzip gc --model` (the builder's CLI, run as a user runs it: the bin of the
// @splitzip/builder package, a dev dependency of the runtime's; the builder cannot depend on the
// runtime). A model re-sharded under new names, its old names' bindings pruned: the first load binds
// every tensor by content key, the next is served from the cache. A shard rewritten so that its
// tensors moved (a new file: another inode): gc --model keeps the old file's bindings (one binding
// per file: another file's are another revision's), and one load binds this file's tensors beside
// them, the tensor moved onto a same-shape tensor's old span and the one on another shape's included.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { writeSafetensorsFile, writeShardedModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/load-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, makeTempDir, randomBytes, sameBytes, type FixtureTensor } from './fixtures.js';
import { holdSecondBinding } from './helpers/hold-second-binding.js';

/** The splitzip command of the installed builder package (its package.json's bin). */
const CLI_PATH = (() => {
  const manifest = createRequire(import.meta.url).resolve('@splitzip/builder/package.json');
  const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: { splitzip: string } };
  return join(dirname(manifest), bin.splitzip);
})();

/** Runs `splitzip <args> --json` in a child process; its parsed report (exit 0 expected). */
function runSplitzip(args: readonly string[]): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_PATH, ...args, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`splitzip ${args.join(' ')}: exit ${code}\nstdout: ${stdout}\nstderr: ${stderr}`));
      else resolve(JSON.parse(stdout) as Record<string, unknown>);
    });
  });
}

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  if (!existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: run \`pnpm --filter @splitzip/builder build\` first`);
  ({ dir: root, cleanup } = await makeTempDir('gc-model-loads'));
});
afterAll(async () => {
  await cleanup?.();
});

const bf16 = (name: string, shape: number[], seed: number): FixtureTensor => ({ name, dtype: 'BF16', shape, data: bf16Weights(shape[0]! * shape[1]!, seed) });
// a, b and c have one size, c another shape; shard 1 holds a b c d, shard 2 e f g (maxShardBytes).
const a = bf16('a.weight', [64, 64], 901);
const b = bf16('b.weight', [64, 64], 902);
const c = bf16('c.weight', [32, 128], 903);
const d = bf16('d.weight', [48, 64], 904);
const e = bf16('e.weight', [128, 64], 905);
const f = bf16('f.weight', [64, 64], 906);
const g: FixtureTensor = { name: 'g.bias', dtype: 'F32', shape: [64], data: randomBytes(256, 907) };
const TENSORS = [a, b, c, d, e, f, g];
const SHARD_1 = 'model-00001-of-00002.safetensors';

async function writeTestModel(dir: string, maxShardBytes: number): Promise<void> {
  await writeShardedModel(dir, TENSORS, { maxShardBytes, shardMetadata: { format: 'pt' }, shardNamePrefix: 'model' });
}

/** The model in `dir` as two shards (with its index), built into a new cache `cache` by the CLI. */
async function buildTwoShardModel(dir: string, cache: string): Promise<void> {
  await writeTestModel(dir, 4 * 8192);
  await runSplitzip(['build', dir, '--out', cache, '--quiet']);
}

/** How many slice bindings the cache holds. */
async function countBindings(cache: string): Promise<number> {
  const store = await openCacheStore(cache);
  try {
    let count = 0;
    for (const entry of store.entries()) count += entry.sliceKeys.length;
    return count;
  } finally {
    await store.close();
  }
}

/** One load of `model` through a fresh handle of `cache` (another process's): every tensor bit-exact; reasons and details by name. */
async function loadOnce(cache: string, model: string): Promise<{ reasons: Record<string, string>; details: Record<string, string>; fromCache: number }> {
  const handle = await openShardCache(cache);
  try {
    const load = loadModel(model, handle, { backend: 'cpu' });
    for await (const tensor of load) expect(sameBytes(tensor.data, TENSORS.find((t) => t.name === tensor.name)!.data), tensor.name).toBe(true);
    expect(await handle.flushObjectStamps!()).toMatchObject({ failed: 0 });
    return {
      reasons: Object.fromEntries(load.reports.map((r) => [r.name, r.reason])),
      details: Object.fromEntries(load.reports.map((r) => [r.name, r.detail ?? ''])),
      fromCache: load.totals.fromCache,
    };
  } finally {
    await handle.close();
  }
}

describe('a model re-sharded under new names, after gc --model --prune-other-shards', () => {
  it('the first load binds every cached tensor by content key, the next is served from the cache, bit-exact', async () => {
    const model = join(root, 'v1');
    const resharded = join(root, 'resharded');
    const cache = join(root, 'cache-resharded');
    await buildTwoShardModel(model, cache);
    await writeTestModel(resharded, 2 * 8192);
    const gc = await runSplitzip(['gc', cache, '--model', resharded, '--prune-other-shards']);
    expect(gc.bindings).toMatchObject({ removed: 6 });
    expect(await countBindings(cache)).toBe(0);

    const first = await loadOnce(cache, resharded);
    expect(first.fromCache).toBe(0);
    const missing = Object.keys(first.reasons).filter((name) => first.reasons[name] === 'missing');
    expect(missing).toHaveLength(6);
    for (const name of missing) expect(first.details[name], name).toMatch(/: bound now: /);
    const second = await loadOnce(cache, resharded);
    expect(second.fromCache).toBe(6);
    expect(await countBindings(cache)).toBe(6);
    expect(await runSplitzip(['verify', cache, '--model', resharded, '--quiet'])).toMatchObject({ ok: true });
  });
});

describe('a shard rewritten so that its tensors moved, one of them onto another\'s old span, after gc --model', () => {
  it('one load binds every cached tensor beside the old file\'s bindings (b on a\'s old span with its shape, c on b\'s with another), the next is served from the cache', async () => {
    const model = join(root, 'shifted');
    const cache = join(root, 'cache-shifted');
    await buildTwoShardModel(model, cache);
    // In place: b c d a. b lands on a's old span (same shape), c on b's (another shape), d and a move to new spans.
    await writeSafetensorsFile(join(model, SHARD_1), [b, c, d, a], { format: 'pt' });
    const gc = await runSplitzip(['gc', cache, '--model', model]);
    // What gc leaves: e and f (shard 2, unchanged), and the old file's bindings of shard 1 (another
    // file's: kept, one binding per file; until 0.56 it removed those at no span and to another shape).
    expect(gc.bindings).toMatchObject({ live: 2, unchecked: 1, removed: 0 });
    await holdSecondBinding(cache); // format 3 already: a load binds beside only then

    const first = await loadOnce(cache, model);
    // c on b's old span (another shape): as unbound for this file, found by content key and bound beside (it stayed stale while gc kept that binding).
    expect(first.reasons).toEqual({ 'a.weight': 'missing', 'b.weight': 'stale', 'c.weight': 'missing', 'd.weight': 'missing', 'e.weight': 'cached', 'f.weight': 'cached', 'g.bias': 'dtype' });
    for (const name of ['a.weight', 'b.weight', 'c.weight', 'd.weight']) expect(first.details[name], name).toMatch(/: bound now: /);
    expect(first.details['b.weight']).toMatch(/, of this tensor's name, to which this file's binding of the slice is added beside entry [0-9a-f]{40}'s binding of other files \(one binding per file: revisions of a model share the cache\): bound now: /);
    const second = await loadOnce(cache, model);
    expect(second.reasons).toEqual({ 'a.weight': 'cached', 'b.weight': 'cached', 'c.weight': 'cached', 'd.weight': 'cached', 'e.weight': 'cached', 'f.weight': 'cached', 'g.bias': 'dtype' });
    // This file's six, and the old file's four of shard 1 (a b c d) beside them.
    expect(await countBindings(cache)).toBe(10 + 2); // and holdSecondBinding's two
    expect(await runSplitzip(['verify', cache, '--model', model, '--quiet'])).toMatchObject({ ok: true });
  });
});
