import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SafetensorsModel } from '@splitzip/safetensors';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { openShardCache, type ShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, readAllRaw, sameBytes, standardTensors, writeModel } from './fixtures.js';

let cleanup: () => Promise<void>;
let modelA: SafetensorsModel;
let modelB: SafetensorsModel;
let cacheDir: string;
let keys: Map<string, string>;
let raw: Map<string, Uint8Array>;

beforeAll(async () => {
  const temp = await makeTempDir('concurrency');
  cleanup = temp.cleanup;
  const tensors = standardTensors();
  modelA = await writeModel(join(temp.dir, 'a'), tensors);
  // The same weights under other shard names: a second deployment of the model.
  modelB = await writeModel(join(temp.dir, 'b'), tensors, 24 * 1024, 'copy');
  cacheDir = join(temp.dir, 'cache');
  keys = await buildCache(modelA, cacheDir);
  raw = await readAllRaw(modelA);
});
afterAll(async () => {
  await modelA?.close();
  await modelB?.close();
  await cleanup?.();
});

function runAliasChild(items: unknown[]): Promise<string> {
  const script = fileURLToPath(new URL('./helpers/alias-child.mjs', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, cacheDir, JSON.stringify(items)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`alias child exited ${code}: ${err}`))));
  });
}

async function checkedLoad(model: SafetensorsModel, cache: ShardCache, options: Parameters<typeof loadModel>[2] = {}) {
  const load = loadModel(model, cache, options);
  for await (const tensor of load) {
    expect(sameBytes(tensor.data, raw.get(tensor.name) as Uint8Array), tensor.name).toBe(true);
  }
  return load.totals;
}

describe('concurrency', () => {
  it('several loadModel calls on one cache handle, while another process aliases slices', async () => {
    const cache = await openShardCache(cacheDir);
    const snapshot = await openShardCache(cacheDir); // a second handle that will not refresh
    try {
      const bItems = modelB.tensors
        .filter((t) => keys.has(t.name))
        // With B's file stamps, as a builder records them: an alias without one leaves B's files unchecked.
        .map((t) => ({ key: keys.get(t.name), ...t.slice, stamp: modelB.shards.find((shard) => shard.name === t.slice.shardName)?.stamp }));
      expect(bItems.length).toBe(9);
      const shared = cache.createStagingPool({ slotCount: 2 });
      // Loads repeat until the child is done, so they really overlap its commits.
      let childDone = false;
      const child = runAliasChild(bItems).finally(() => {
        childDone = true;
      });
      const loadUntilChildDone = async (options: Parameters<typeof loadModel>[2]) => {
        let rounds = 0;
        do {
          const total = await checkedLoad(modelA, cache, options);
          expect(total.fromCache).toBe(9);
          expect(total.fallbacks).toBe(0);
          rounds += 1;
        } while (!childDone);
        return rounds;
      };
      const [childOut, ...rounds] = await Promise.all([
        child,
        loadUntilChildDone({ verifyDigest: true, concurrency: 4 }),
        loadUntilChildDone({ concurrency: 1 }),
        loadUntilChildDone({ pool: shared, concurrency: 3 }),
        loadUntilChildDone({ pool: shared, concurrency: 2, verifyDigest: true }),
        // This process aliases too, at the same time (idempotent with the child's binds).
        cache.aliasSlice(bItems[0]?.key as string, bItems[0]?.shardName as string, bItems[0]?.offsetBytes as number, bItems[0]?.sizeBytes as number),
      ]);
      expect(childOut).toBe('done 9');
      expect(rounds[4]).toBe(true);
      expect((rounds.slice(0, 4) as number[]).every((n) => n >= 2)).toBe(true);
      expect(shared.stats().inUse).toBe(0);
      expect(shared.stats().peakInUse).toBeLessThanOrEqual(2);

      // The handle that does not refresh keeps its snapshot: B's slices are unknown to it (raw, correct)…
      // (An empty tensor is found by its content key, which needs no slice: A's entry serves it.)
      const stale = await checkedLoad(modelB, snapshot, { refresh: false });
      expect(stale.fromCache).toBe(modelB.tensors.filter((t) => t.dtype === 'BF16' && t.slice.sizeBytes === 0).length);
      expect(stale.fromCache).toBe(1);
      // …and picks the other process's aliases up on refresh.
      const fresh = await checkedLoad(modelB, snapshot);
      expect(fresh.fromCache).toBe(9);
      expect(fresh.byReason.missing).toBe(0);
    } finally {
      await snapshot.close();
      await cache.close();
    }
  });

  it('loads with pools of their own share one thread decoder that reads every blob on its workers', async () => {
    const cache = await openShardCache(cacheDir);
    // Every tensor is read and decoded on a worker; each worker keeps a slot of one pool at a time,
    // so loads with different pools make it give one back and take another.
    const threads = createThreadDecoder({ threads: 2, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    try {
      await threads.warmUp();
      const before = threads.stats().threadReads;
      const pools = [cache.createStagingPool({ slotCount: 1, shared: true }), cache.createStagingPool({ slotCount: 2, shared: true }), cache.createStagingPool({ slotCount: 3, shared: true })];
      const loads: Promise<unknown>[] = [];
      for (let round = 0; round < 3; round++) {
        for (const [k, pool] of pools.entries()) {
          loads.push(
            checkedLoad(modelA, cache, { backend: threads, pool, concurrency: 1 + k }).then((total) => {
              expect(total.fromCache).toBe(9);
              expect(total.fallbacks).toBe(0);
            }),
          );
        }
        // And one with a pool loadModel makes itself.
        loads.push(checkedLoad(modelA, cache, { backend: threads, concurrency: 4 }).then((total) => expect(total.fromCache).toBe(9)));
      }
      await Promise.all(loads);
      // Every read of a non-empty entry went through the workers (the empty tensor has nothing to read).
      expect(threads.stats().threadReads - before).toBeGreaterThanOrEqual(12 * 8);
      // Every slot comes back once the workers are idle.
      for (let k = 0; k < 200 && pools.some((pool) => pool.stats().inUse > 0); k++) await new Promise((resolve) => setTimeout(resolve, 5));
      for (const pool of pools) expect(pool.stats().inUse).toBe(0);
    } finally {
      await threads.close();
      await cache.close();
    }
  });
});
