// The user probe (item 1): WorkerDecoder.decode(ordinaryPayload) with no `out` returned an array
// over an ordinary ArrayBuffer below minParallelElements (or for a one-chunk payload) and over a
// SharedArrayBuffer above it, so a transfer or crypto.subtle.digest of the result failed only on
// large tensors. Now: always a SharedArrayBuffer without `out`, and `out` itself with one.
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { afterAll, describe, expect, it } from 'vitest';
import { createWorkerDecoder } from '../src/node.js';
import { modelLikeValues } from './fixtures.js';
import { inShared } from './payload-helpers.js';
import { firstMismatch } from './reference-decode.js';

const workerUrl = new URL('../dist/decode-worker.js', import.meta.url);
// Small sizes on both sides of the parallel threshold (1024-value chunks: 2^13 values are 8 chunks).
const MIN_PARALLEL = 2 ** 13;

describe('worker decoder: the buffer a decode without `out` returns', () => {
  const decoder = createWorkerDecoder({ threads: 1, workerUrl, minParallelElements: MIN_PARALLEL });
  afterAll(() => decoder.dispose());

  const cases = [
    ['below minParallelElements', MIN_PARALLEL - 1, 1024],
    ['at minParallelElements', MIN_PARALLEL, 1024],
    ['above, one chunk', MIN_PARALLEL + 5, 65_536],
    ['above, many chunks', 4 * MIN_PARALLEL + 3, 1024],
  ] as const;

  for (const [name, count, chunkSize] of cases) {
    it(`${name} (${count} values): a SharedArrayBuffer for an ordinary and a shared payload, verified or not`, async () => {
      const values = modelLikeValues(count);
      const payload = codecEncode(values, calibrateCodebook(values).codebook, { chunkSize });
      for (const p of [payload, inShared(payload)]) {
        for (const verify of [true, false]) {
          const out = await decoder.decode(p, undefined, { verify });
          expect(out.buffer).toBeInstanceOf(SharedArrayBuffer);
          expect(firstMismatch(out, values)).toBe(-1);
        }
      }
    });
  }

  it('with an ordinary `out`, below and above the threshold: `out` itself', async () => {
    for (const count of [MIN_PARALLEL - 1, 4 * MIN_PARALLEL + 3]) {
      const values = modelLikeValues(count);
      const payload = codecEncode(values, calibrateCodebook(values).codebook);
      for (const p of [payload, inShared(payload)]) {
        const out = new Uint16Array(count);
        expect(await decoder.decode(p, out)).toBe(out);
        expect(firstMismatch(out, values)).toBe(-1);
      }
    }
  });
});
