// The worker decoder stages ordinary arrays in a shared codec arena, replaced by a larger one when
// a tensor does not fit. The workers kept every replaced arena's memory (they allocate too little
// for V8 to collect on its own) until they ended: tensors growing in steps left each old stage
// mapped. The workers now collect once idle after a detach (src/collect-garbage.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { calibrateCodebook, encode } from '@splitzip/codec';
import { afterAll, expect, it } from 'vitest';
import { collectGarbage } from '../src/collect-garbage.js';
import { createWorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 1, workerUrl });

afterAll(async () => {
  await decoder.dispose();
});

async function settle(): Promise<number> {
  for (let round = 0; round < 3; round += 1) {
    collectGarbage();
    await sleep(30);
  }
  return process.memoryUsage().rss;
}

it('frees a replaced staging arena on the workers too', async () => {
  // Each tensor is 1.3x the last: more than the 1.25x headroom of a stage, so each replaces it.
  const sizes = [1, 1.3, 1.69, 2.2, 2.86, 3.71, 4.83, 6.27].map((m) => Math.floor(m * 1_000_000) + 1);
  const payloads = sizes.map((n, i) => {
    const values = modelLikeValues(n, 40 + i);
    return { values, payload: encode(values, calibrateCodebook(values).codebook) };
  });
  const before = await settle();
  for (const { values, payload } of payloads) {
    const out = await decoder.decode(payload);
    expect(Buffer.from(out.buffer, out.byteOffset, out.byteLength).equals(Buffer.from(values.buffer, values.byteOffset, values.byteLength))).toBe(true);
  }
  const after = await settle();
  // The last stage (payload and values of the largest tensor, with headroom) stays, ~30 MB; held
  // on the worker, the seven before it add ~3.3x that.
  const lastStageBytes = 1.25 * 3.5 * (sizes.at(-1) as number);
  expect(after - before).toBeLessThan(2 * lastStageBytes);
}, 120_000);
