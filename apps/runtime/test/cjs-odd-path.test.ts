// The CommonJS build under a path that needs escaping in a file: URL (#, %41, a space).
import { fileURLToPath } from 'node:url';
import { copyBuildToOddPath, type OddPathCopy } from '@splitzip/test-support/odd-path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as Runtime from '../src/index.js';

let copy: OddPathCopy;
beforeAll(() => {
  copy = copyBuildToOddPath(fileURLToPath(new URL('..', import.meta.url)));
});
afterAll(() => copy?.remove());

describe('the CommonJS build in a directory named "splitzip #1 %41-…"', () => {
  it('starts its decode threads from beside the bundle (they were looked for under the path cut at "#": DECODE_FAILED)', { timeout: 30_000 }, async () => {
    const { createThreadDecoder } = copy.requireFromCopy('./dist/index.cjs') as typeof Runtime;
    const decoder = createThreadDecoder({ threads: 1 });
    try {
      await expect(decoder.warmUp()).resolves.toBeUndefined();
    } finally {
      await decoder.close();
    }
  });
});
