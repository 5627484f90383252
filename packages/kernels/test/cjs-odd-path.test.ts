// The CommonJS build under a path that needs escaping in a file: URL (#, %41, a space).
import { calibrateCodebook, encode as codecEncode } from '@splitzip/codec';
import { copyBuildToOddPath, type OddPathCopy } from '@splitzip/test-support/odd-path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as KernelsNode from '../src/node.js';
import { modelLikeValues } from './fixtures.js';

let copy: OddPathCopy;
beforeAll(() => {
  copy = copyBuildToOddPath(fileURLToPath(new URL('..', import.meta.url)));
});
afterAll(() => copy?.remove());

describe('the CommonJS build in a directory named "splitzip #1 %41-…"', () => {
  it('starts its decode workers from beside the bundle (they were looked for under the path cut at "#")', { timeout: 30_000 }, async () => {
    const { createWorkerDecoder } = copy.requireFromCopy('./dist/node.cjs') as typeof KernelsNode;
    const values = modelLikeValues(2 ** 18 + 3);
    const encoded = codecEncode(values, calibrateCodebook(values).codebook);
    const payload = new Uint8Array(new SharedArrayBuffer(encoded.length));
    payload.set(encoded);
    // callerDecodes: false: only a worker decodes, so a worker that could not load fails the call
    // instead of the calling thread doing the work unseen.
    const decoder = createWorkerDecoder({ threads: 1, minParallelElements: 0, callerDecodes: false });
    try {
      const out = await decoder.decode(payload);
      expect(Buffer.from(out.buffer, out.byteOffset, out.byteLength).equals(Buffer.from(values.buffer))).toBe(true);
    } finally {
      await decoder.dispose();
    }
  });
});
