// The text of gc --model when the store removed fewer bindings than were judged to go: another
// gc --model had removed them, and the text said they "were bound again meanwhile, and stay".
import { describe, expect, it } from 'vitest';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { renderModelBindings } from '../src/render-model-bindings.js';

const KEY = 'a'.repeat(40);
const judged = (offsetBytes: number) => ({ shardName: 'model.safetensors', offsetBytes, sizeBytes: 8, key: KEY, qualname: 'a.weight', verdict: 'leftover' as const });
const report: ModelBindingsReport = {
  model: '/m',
  dryRun: false,
  pruneOtherShards: false,
  shards: ['model.safetensors'],
  live: 1,
  unchecked: 0,
  leftover: 3,
  mismatched: 0,
  otherShards: [],
  prune: [judged(0), judged(8), judged(16)],
  removed: 1,
};

describe('renderModelBindings', () => {
  it('a partial removal says the others were removed or bound again by another writer, and that the lines list what was judged', () => {
    const lines = renderModelBindings(report, '/c', 'removed');
    expect(lines[1]).toBe('removed 1 binding (of 3 judged to go: another writer removed or bound the others again since, left as they are); judged to go:');
    expect(lines[2]).toBe("  model.safetensors: 3 at no tensor's span now");
  });

  it('a full removal lists what went', () => {
    const lines = renderModelBindings({ ...report, removed: 3 }, '/c', 'removed');
    expect(lines[1]).toBe('removed 3 bindings:');
  });
});
