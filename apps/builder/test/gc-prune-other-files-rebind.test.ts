// gc --model A --prune-other-files removes revision B's bindings beside A's. The text said B "binds
// them again at its next load, one hash pass each", but a load binds beside another file's binding
// only while the cache holds a second binding of some slice (it never moves a cache to manifest
// format 3): where the prune removes the last one, B's changed tensors stay `stale` until its build.
// A user's probe: build A; build B; gc --model A --prune-other-files; B's loads were 3 stale each time.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir, type TensorData } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';

let temp: TempDir;
beforeEach(async () => {
  temp = await createTempDir();
});
afterEach(async () => {
  await temp?.cleanup();
});

const tensors = (seeds: number[], shard = 'model'): TensorData[] => seeds.map((seed, i) => gaussianBf16(`${shard}.${i}.weight`, [64, 64], seed));

async function writeModel(name: string, file: string, data: TensorData[]): Promise<string> {
  const dir = join(temp.path, name);
  await mkdir(dir, { recursive: true });
  await writeSingleFileModel(join(dir, file), data);
  return dir;
}

async function build(model: string, cache: string): Promise<void> {
  expect((await runInProcess(['build', model, '--out', cache, '--jobs', '0', '--quiet'])).code).toBe(0);
}

/**
 * The text (continuation lines of fitReportLines unfolded) and the JSON bindings of the same command,
 * each run on a cache of its own built alike (`caches`): a real prune changes the one it runs on.
 */
async function prune(caches: [string, string], model: string, dryRun: boolean): Promise<{ text: string; bindings: Record<string, unknown> }> {
  const argv = (cache: string) => ['gc', cache, '--model', model, '--prune-other-files', ...(dryRun ? ['--dry-run'] : [])];
  const json = await runInProcess([...argv(caches[1]), '--json']);
  expect(json.code).toBe(0);
  const text = await runInProcess(argv(caches[0]));
  expect(text.code).toBe(0);
  return { text: text.out.replace(/\n {4,}/g, ' '), bindings: (JSON.parse(json.out) as { bindings: Record<string, unknown> }).bindings };
}

describe('gc --model --prune-other-files: what the other revision\'s loads do with the bindings it removed', () => {
  it('where the prune leaves no second binding in the cache, says B binds none of them again and names its build', async () => {
    const a = await writeModel('A', 'model.safetensors', tensors([1, 2, 3, 4]));
    const b = await writeModel('B', 'model.safetensors', tensors([1, 22, 3, 44]));
    const caches: [string, string] = [join(temp.path, 'cache'), join(temp.path, 'cache-json')];
    for (const cache of caches) for (const model of [a, b]) await build(model, cache);
    const dry = await prune(caches, a, true);
    expect(dry.bindings).toMatchObject({ otherFiles: 2, otherFilesBeside: 2, secondBindingHeld: false });
    expect(dry.text).toContain('their slices keep another binding, and the cache would hold no second binding of any slice after this prune');
    const run = await prune(caches, a, false);
    expect(run.bindings).toMatchObject({ otherFiles: 2, otherFilesBeside: 2, secondBindingHeld: false, removed: 2 });
    expect(run.text).toContain('binds none of them again at its loads, reading those tensors raw (`stale`, hashed once per process)');
    expect(run.text).toContain(`until \`splitzip build <that model> --out ${caches[0]}\` binds them beside`);
    expect(run.text).not.toContain('binds them again at its next load');
  });

  it('where another slice keeps a second binding, says B binds them again beside at its next load', async () => {
    const a = await writeModel('A', 'model.safetensors', tensors([1, 2, 3, 4]));
    const b = await writeModel('B', 'model.safetensors', tensors([1, 22, 3, 44]));
    // Two revisions of another shard name, bound side by side: gc --model A keeps their bindings.
    const d1 = await writeModel('D1', 'other.safetensors', tensors([5, 6], 'other'));
    const d2 = await writeModel('D2', 'other.safetensors', tensors([5, 66], 'other'));
    const caches: [string, string] = [join(temp.path, 'cache'), join(temp.path, 'cache-json')];
    for (const cache of caches) for (const model of [a, b, d1, d2]) await build(model, cache);
    const run = await prune(caches, a, false);
    expect(run.bindings).toMatchObject({ otherFiles: 2, otherFilesBeside: 2, secondBindingHeld: true, removed: 2 });
    expect(run.text).toContain('and the cache still holds a second binding of some slice after this prune');
    expect(run.text).toContain('binds them again beside it at its next load, one hash pass each');
  });
});
