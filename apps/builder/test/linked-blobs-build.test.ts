// A build of a cache whose blobs/ links another cache's (review of 4e5679d, 2026-12-07): blob files
// are named <contentKey>.bin whatever the chunk size, so B's build at --chunk-size 512 of a tensor A
// holds replaced A's blob (verify A failed; A's rebuild put it back and broke B). The build now
// refuses through the link, naming it and the remedy; A's blobs stay as they were.
import { mkdir, readFile, readdir, rename, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCli } from '../src/run-cli.js';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { memoryIo } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-linked-blobs-build-');
});
afterAll(async () => temp?.cleanup());

async function snapshotBlobs(dir: string): Promise<Map<string, Buffer>> {
  const names = (await readdir(dir)).sort();
  return new Map(await Promise.all(names.map(async (name) => [name, await readFile(join(dir, name))] as const)));
}

it("build of cache B whose blobs/ links A's, at another chunk size, refuses UNSAFE_BLOB_PATH; A's blobs unchanged; verify of both OK", async () => {
  const a = join(temp.path, 'A');
  const b = join(temp.path, 'B');
  await mkdir(join(temp.path, 'models'));
  const m = await writeSingleFileModel(join(temp.path, 'models', 'm.safetensors'), [gaussianBf16('w0', [256, 256], 11), gaussianBf16('w1', [256, 256], 12)]);
  const n = await writeSingleFileModel(join(temp.path, 'models', 'n.safetensors'), [gaussianBf16('v0', [256, 256], 21)]);
  expect(await runCli(['build', m, '--out', a, '--jobs', '0', '--quiet'], { io: memoryIo().io })).toBe(0);
  expect(await runCli(['build', n, '--out', b, '--jobs', '0', '--chunk-size', '512', '--quiet'], { io: memoryIo().io })).toBe(0);
  for (const name of await readdir(join(b, 'blobs'))) await rename(join(b, 'blobs', name), join(a, 'blobs', name));
  await rm(join(b, 'blobs'), { recursive: true });
  await symlink(join(a, 'blobs'), join(b, 'blobs'));
  const before = await snapshotBlobs(join(a, 'blobs'));

  const { io, err } = memoryIo();
  expect(await runCli(['build', m, '--out', b, '--jobs', '0', '--chunk-size', '512', '--quiet'], { io }), err()).toBe(1);
  expect(err()).toMatch(/UNSAFE_BLOB_PATH: addEntries refuses: .*B\/blobs is a symbolic link \(to .*A\/blobs\).*Link the whole cache directory instead \(a cache root that is a link works\)/);
  expect(await snapshotBlobs(join(a, 'blobs'))).toEqual(before);
  for (const [cache, model] of [[a, m], [b, n]] as const) {
    const verify = memoryIo();
    expect(await runCli(['verify', cache, '--model', model, '--quiet'], { io: verify.io }), verify.err()).toBe(0);
  }
});
