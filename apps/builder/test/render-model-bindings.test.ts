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
  otherFiles: 0,
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

  // gc --model given another model of the same shard names removed every binding of the cache's model, saying nothing.
  it('a model none of whose tensors is bound gets a note that it may be the wrong model', () => {
    const wrong = { ...report, live: 0, removed: 3 };
    expect(renderModelBindings(wrong, '/c', 'removed').at(-1)).toMatch(/^note: none of the model's tensors is bound in this cache: .*bindings removed were another model's/);
    expect(renderModelBindings({ ...wrong, dryRun: true }, '/c', 'would remove').at(-1)).toMatch(/bindings above would be another model's/);
    expect(renderModelBindings(report, '/c', 'removed').join('\n')).not.toMatch(/^note:/m);
  });
});
