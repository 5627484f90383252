// The worst failure is a slice key answering another tensor's bytes. Revision B's a.weight holds
// the bytes of A's c.weight (same shard name and layout); with A's slices of both unbound (as after
// `gc --model` of a third revision), B's loads must not bind A's a.weight slice to c.weight's entry,
// whatever evidence B's own file gives: a bare slice request (no model, nothing to hash) follows
// the binding. c972b56 bound it ("this model's own" entry) and was reverted for it (e2175b0).
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isRuntimeError } from '../src/errors.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openShardCache } from '../src/open-shard-cache.js';
import type { ShardCache } from '../src/open-shard-cache.js';
import { bf16Weights, buildCache, makeTempDir, readAllRaw, sameBytes, writeModel, type FixtureTensor } from './fixtures.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const revisionA = (): FixtureTensor[] => [
  { name: 'w', dtype: 'BF16', shape: [64, 64], data: bf16Weights(4096, 5) },
  { name: 'a.weight', dtype: 'BF16', shape: [512], data: bf16Weights(512, 7, 0) },
  { name: 'c.weight', dtype: 'BF16', shape: [512], data: bf16Weights(512, 9, 0) },
];

describe('a bare slice request after another revision loaded', () => {
  for (const unbound of ['both never bound', 'a.weight skipped, c.weight never bound'] as const) {
    it(`never answers another tensor's bytes (${unbound})`, async () => {
      const { dir, cleanup } = await makeTempDir('splitzip-bare-slice-');
      cleanups.push(cleanup);
      const tensorsA = revisionA();
      const A = await writeModel(join(dir, 'A'), tensorsA, 1 << 20);
      const B = await writeModel(join(dir, 'B'), tensorsA.map((t) => (t.name === 'a.weight' ? { ...t, data: tensorsA[2]!.data } : t)), 1 << 20);
      cleanups.push(() => A.close(), () => B.close());
      const cacheDir = join(dir, 'cache');
      await buildCache(A, cacheDir, unbound === 'both never bound' ? { noAlias: ['a.weight', 'c.weight'] } : { skip: ['a.weight'], noAlias: ['c.weight'] });
      const sliceA = A.tensors.find((t) => t.name === 'a.weight')!.slice;
      const rawA = (await readAllRaw(A)).get('a.weight')!;
      const bare = async (cache: ShardCache): Promise<string> =>
        loadTensor(sliceA, { cache, backend: 'cpu' }).then(
          (t) => (sameBytes(t.data, rawA) ? 'right bytes' : 'WRONG BYTES'),
          (e: unknown) => (isRuntimeError(e) ? e.code : String(e)),
        );
      // Two loads of B, each with a fresh handle (the second finds what the first bound).
      for (let i = 0; i < 2; i++) {
        const cache = await openShardCache(cacheDir);
        try {
          const load = loadModel(B, cache, { backend: 'cpu' });
          await load.drain();
        } finally {
          await cache.close();
        }
      }
      const cache = await openShardCache(cacheDir);
      try {
        expect(await bare(cache)).not.toBe('WRONG BYTES');
      } finally {
        await cache.close();
      }
    });
  }
});
