// MODEL_OPEN_FAILED and CACHE_OPEN_FAILED name the location once: `cannot open the model at <path>:
// PATH_NOT_FOUND: <path>: …` and `… at <dir>: NOT_A_CACHE: no manifest.json (file <dir>/manifest.json):
// … --out <dir>` printed a long path two or three times (until 2026-12-07). A command to copy still
// names it whole.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openModel } from '../src/open-model.js';
import { openShardCache } from '../src/open-shard-cache.js';
import { buildCache, makeTempDir, standardTensors, writeModel } from './fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir: root, cleanup } = await makeTempDir('location-once'));
});
afterAll(async () => {
  await cleanup();
});

/** How many times `text` says `path` (whole: as itself or as the start of a path below it). */
const times = (text: string, path: string): number => text.split(path).length - 1;

/** The message of what `open` rejects with, with its code checked. */
async function messageOf(open: () => Promise<unknown>, code: string): Promise<string> {
  const error = await open().then(
    () => expect.unreachable('it opened'),
    (reason: unknown) => reason as Error & { code: string },
  );
  expect(error.code).toBe(code);
  return error.message;
}

describe('an open failure names its location once', () => {
  it('MODEL_OPEN_FAILED: a missing path, a directory with no model', async () => {
    const missing = join(root, 'a-long-directory-name-of-models', 'no-such-model');
    const missingSaid = await messageOf(() => openModel(missing), 'MODEL_OPEN_FAILED');
    expect(missingSaid).toMatch(/^cannot open the model: PATH_NOT_FOUND: /);
    expect(times(missingSaid, missing)).toBe(1);
    const empty = join(root, 'an-empty-model-directory');
    await mkdir(empty);
    const emptySaid = await messageOf(() => openModel(empty), 'MODEL_OPEN_FAILED');
    expect(times(emptySaid, empty)).toBe(1);
  });

  it('CACHE_OPEN_FAILED: no manifest, a file, a model directory, a cut-off manifest (its file named relative to the cache)', async () => {
    const none = join(root, 'no-cache-here');
    await mkdir(none);
    const noneSaid = await messageOf(() => openShardCache(none), 'CACHE_OPEN_FAILED');
    // Where, and the build to copy.
    expect(times(noneSaid, none)).toBe(2);
    expect(noneSaid).toContain(`--out ${none}\``);
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    const fileSaid = await messageOf(() => openShardCache(file), 'CACHE_OPEN_FAILED');
    expect(times(fileSaid, file)).toBe(1);
    expect(fileSaid).toContain('the cache path is a file, not a directory');

    const modelDir = join(root, 'a-model');
    const model = await writeModel(modelDir, standardTensors());
    await model.close();
    const modelSaid = await messageOf(() => openShardCache(modelDir), 'CACHE_OPEN_FAILED');
    expect(times(modelSaid, modelDir)).toBe(2);
    expect(modelSaid).toContain(`\`splitzip build ${modelDir} --out <cache dir>\``);

    const model2 = await writeModel(join(root, 'cut-model'), standardTensors());
    const cut = join(root, 'cut-cache');
    await buildCache(model2, cut);
    await model2.close();
    const manifest = await readFile(join(cut, 'manifest.json'));
    await writeFile(join(cut, 'manifest.json'), manifest.subarray(0, manifest.length >> 1));
    const cutSaid = await messageOf(() => openShardCache(`${cut}/`), 'CACHE_OPEN_FAILED');
    expect(cutSaid).toContain('(file manifest.json)');
    // Where, then the verify and the build --repair to copy.
    expect(times(cutSaid, cut)).toBe(3);
  });
});
