// The text of gc --model when the store removed fewer bindings than were judged to go: another
// gc --model had removed them, and the text said they "were bound again meanwhile, and stay".
import { describe, expect, it } from 'vitest';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { renderModelBindings } from '../src/render-model-bindings.js';

const KEY = 'a'.repeat(40);

/**
 * The lines as written before they were fitted to 120 columns (fc28a74): a continuation line hangs
 * four columns further in than its own (which start at 0 or 2).
 */
function render(...args: Parameters<typeof renderModelBindings>): string[] {
  const fitted = renderModelBindings(...args);
  for (const line of fitted) expect(line.length).toBeLessThanOrEqual(120);
  const lines: string[] = [];
  for (const line of fitted) {
    if (/^ {4}/.test(line) && lines.length > 0) lines[lines.length - 1] += ` ${line.trimStart()}`;
    else lines.push(line);
  }
  return lines;
}
const judged = (offsetBytes: number) => ({ shardName: 'model.safetensors', offsetBytes, sizeBytes: 8, key: KEY, qualname: 'a.weight', verdict: 'leftover' as const });
const report: ModelBindingsReport = {
  model: '/m',
  dryRun: false,
  pruneOtherShards: false,
  pruneOtherFiles: false,
  shards: ['model.safetensors'],
  live: 1,
  unchecked: 0,
  leftover: 3,
  mismatched: 0,
  superseded: 0,
  otherRevision: 0,
  otherRevisions: [],
  otherFileKept: 0,
  otherObjectKept: 0,
  otherShards: [],
  prune: [judged(0), judged(8), judged(16)],
  otherFiles: 0,
  removed: 1,
};

describe('renderModelBindings', () => {
  it('a partial removal says the others were removed or bound again by another writer, and that the lines list what was judged', () => {
    const lines = render(report, '/c', 'removed');
    expect(lines[1]).toBe('removed 1 binding (of 3 judged to go: another writer removed or bound the others again since, left as they are); judged to go:');
    expect(lines[2]).toBe("  model.safetensors: 3 at no tensor's span now");
  });

  it('a full removal lists what went', () => {
    const lines = render({ ...report, removed: 3 }, '/c', 'removed');
    expect(lines[1]).toBe('removed 3 bindings:');
  });

  // gc --model given another model of the same shard names removed every binding of the cache's model, saying nothing.
  it('a model none of whose tensors is bound gets a note that it may be the wrong model', () => {
    const wrong = { ...report, live: 0, removed: 3 };
    expect(render(wrong, '/c', 'removed').at(-1)).toMatch(/^note: none of the model's tensors is bound in this cache: .*bindings removed were another model's/);
    expect(render({ ...wrong, dryRun: true }, '/c', 'would remove').at(-1)).toMatch(/bindings above would be another model's/);
    expect(render(report, '/c', 'removed').join('\n')).not.toMatch(/^note:/m);
  });

  // It said they go "or by `gc --model` of the model they are bound for once its file changed", which
  // kept them (other files' bindings are kept outside a hub tree): --prune-other-files is the way.
  it("other files' kept bindings name gc --model --prune-other-files, and a prune with it says so", () => {
    const kept = render({ ...report, prune: [], removed: 0, otherFileKept: 2 }, '/c', 'removed').join('\n');
    expect(kept).toContain('`splitzip gc /c --model /m --prune-other-files`');
    expect(kept).not.toContain('or by `gc --model` of the model');
    const pruned = render({ ...report, pruneOtherFiles: true, otherFiles: 3, removed: 3 }, '/c', 'removed').join('\n');
    expect(pruned).toContain("3 of them were bound from other files of that shard name than this model's (--prune-other-files:");
    expect(pruned).not.toContain('so gc cannot tell which');
  });

  // It said the other revision "binds them again at its next load" whatever the prune left: a load
  // binds beside another file's binding only while the cache holds a second binding of some slice.
  it('a prune of other files says which of them their model binds again: unbound slices, and beside only while a second binding is held', () => {
    const pruned = { ...report, pruneOtherFiles: true, otherFiles: 3, removed: 3 };
    const mixed = render({ ...pruned, otherFilesBeside: 2, secondBindingHeld: false }, '/c', 'removed').join('\n');
    expect(mixed).toContain('1 of their slices is left unbound: another revision or model of the same shard names that used them binds those again at its next load, one hash pass each');
    expect(mixed).toContain('2 of their slices keep another binding, and the cache holds no second binding of any slice after this prune');
    expect(mixed).toContain('binds none of those again at its loads, reading those tensors raw (`stale`, hashed once per process) until `splitzip build <that model> --out /c` binds them beside');
    const held = render({ ...pruned, otherFilesBeside: 3, secondBindingHeld: true }, '/c', 'removed').join('\n');
    expect(held).toContain('their slices keep another binding, and the cache still holds a second binding of some slice after this prune');
    expect(held).toContain('binds them again beside it at its next load');
    const s3 = render({ ...pruned, otherFilesBeside: 3, secondBindingHeld: true }, 's3://b/c', 'removed').join('\n');
    expect(s3).toContain('beside which no load binds on s3://');
    expect(s3).not.toContain('binds them again beside');
    // A report without the judgement (an older release's --json) states the condition.
    const bare = render(pruned, '/c', 'removed').join('\n');
    expect(bare).toContain('where their slice is left unbound, or beside the binding left there where the cache still holds a second binding of some slice');
    expect(bare).toContain('else its loads bind none again');
  });
});
