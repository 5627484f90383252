// Two thread decoders taking turns over one idle staging pool (process-wide: a user's
// createThreadDecoder() beside 'threads', or two of them). Each decoder's worker took the arena's
// share from the other's (arena.share), whose attachment was then retired: that decoder's later
// loads served every cached tensor raw (`cache-failed`, "share 0 of this arena was handed out
// again"). Workers now attach again when another took their share since (arena.shareFor).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel, releaseIdleStagingPools } from '../src/index.js';
import { bf16Weights, openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

const VALUES = 3_000_001;
let fixture: CachedModelFixture;
// Every tensor to a worker (no inline decodes), one worker each: both use share 0.
const a = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });
const b = createThreadDecoder({ threads: 1, inlineMaxValues: 0, startupInlineMaxValues: 0 });

beforeAll(async () => {
  fixture = await openCachedModel('two-thread-decoders', [{ name: 'w', dtype: 'BF16', shape: [VALUES], data: bf16Weights(VALUES, 3) }]);
}, 60_000);
afterAll(async () => {
  await a.close();
  await b.close();
  await fixture?.close();
  releaseIdleStagingPools();
});

describe('two thread decoders over one idle staging pool, in turn', () => {
  it('every load of either serves the tensor from the cache, bit-identical', { timeout: 120_000 }, async () => {
    const seen: string[] = [];
    for (const [label, decoder] of [['A', a], ['B', b], ['A', a], ['B', b]] as const) {
      for await (const tensor of loadModel(fixture.model, fixture.cache, { backend: decoder })) {
        const same = sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array);
        seen.push(`${label} ${tensor.source} ${same}${tensor.source === 'raw' ? ` ${tensor.report.reason}: ${tensor.report.detail}` : ''}`);
      }
    }
    expect(seen).toEqual(['A cache true', 'B cache true', 'A cache true', 'B cache true']);
  });
});
