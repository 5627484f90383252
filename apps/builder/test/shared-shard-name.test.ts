// Two models whose shards have one name (text_encoder/model.safetensors and
// text_encoder_2/model.safetensors, as in a diffusers pipeline) built into one cache: gc --model of
// either judges the other's bindings left behind and removes them. The cache records stamps, not
// paths, so it cannot tell another model's file from this model's earlier file replaced by a new
// one; it now says how many it removes were recorded from another file, and a build says so first.
import { cp, mkdir, writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-shared-shard-name-');
});
afterAll(async () => temp?.cleanup());

describe('two models with one shard name in one cache', () => {
  it('build binds beside the other file\'s bindings without a warning (0.56); gc --model says how many it removes came from another file', async () => {
    await mkdir(join(temp.path, 'text_encoder'));
    await mkdir(join(temp.path, 'text_encoder_2'));
    const first = await writeSingleFileModel(join(temp.path, 'text_encoder', 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16('b.weight', [64, 64], 2)]);
    const second = await writeSingleFileModel(join(temp.path, 'text_encoder_2', 'model.safetensors'), [gaussianBf16('c.weight', [64, 96], 3), gaussianBf16('d.weight', [64, 96], 4), gaussianBf16('e.weight', [64, 96], 5)]);
    const cacheDir = join(temp.path, 'cache');
    const built = await run(['build', first, '--out', cacheDir, '--quiet']);
    expect(built.code).toBe(0);
    expect(built.err).toBe('');
    // --json: the report only, into a copy of the shared cache (a fresh cache has nothing to warn of).
    const jsonCache = join(temp.path, 'cache-json-copy');
    await cp(cacheDir, jsonCache, { recursive: true });
    const json = await run(['build', second, '--out', jsonCache, '--json']);
    expect(json.code).toBe(0);
    expect(json.err).toBe('');
    expect(JSON.parse(json.out)).toMatchObject({ encoded: 3 });
    const text = await run(['build', second, '--out', cacheDir, '--quiet']);
    expect(text.code).toBe(0);
    // Before 0.56 it warned that the other file's bindings were in the way of gc --model and of conflicts; they are not.
    expect(text.err).toBe('');

    const dry = await run(['gc', cacheDir, '--model', second, '--dry-run', '--json']);
    const bindings = (JSON.parse(dry.out) as { bindings: { leftover: number; otherFiles: number; otherFileKept: number; prune: unknown[] } }).bindings;
    // The other file's bindings are kept since 0.56 (a binding per file; the stamps cannot tell another
    // model's file from a replaced one): until then judged left behind and removed (`otherFiles`).
    expect(bindings).toMatchObject({ leftover: 0, otherFiles: 0, otherFileKept: 2, prune: [] });
    const gc = await run(['gc', cacheDir, '--model', second]);
    expect(gc.out).toContain('removed 0 bindings');
    // That note within 120 columns, its rest 6 columns in (4 deeper than it starts).
    expect(gc.out.split('\n').filter((line) => line.length > 120)).toEqual([]);
    expect(gc.out.replace(/\n {6}/g, ' ')).toContain("  kept 2 bindings recorded with other files of this model's shard names (another inode");
    expect(gc.out).not.toContain('caches of their own');
  });

  it('bindings this model\'s own file left behind (rewritten in place, tensors moved) are not counted as another file\'s', async () => {
    await mkdir(join(temp.path, 'own'));
    const path = join(temp.path, 'own', 'model.safetensors');
    await writeSingleFileModel(path, [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16('b.weight', [64, 64], 2)]);
    const cacheDir = join(temp.path, 'cache-own');
    expect((await run(['build', path, '--out', cacheDir, '--quiet'])).code).toBe(0);
    // The same file (same inode) rewritten with another first tensor: b.weight moves.
    const moved = join(temp.path, 'own-moved.safetensors');
    await writeSingleFileModel(moved, [gaussianBf16('a.weight', [64, 96], 6), gaussianBf16('b.weight', [64, 64], 2)]);
    await writeFile(path, await readFile(moved));
    const text = await run(['build', path, '--out', cacheDir, '--quiet']);
    expect(text.err).not.toContain('recorded from another file');
    const dry = await run(['gc', cacheDir, '--model', path, '--dry-run', '--json']);
    expect((JSON.parse(dry.out) as { bindings: { leftover: number; otherFiles: number } }).bindings).toMatchObject({ leftover: 2, otherFiles: 0 });
  });
});
