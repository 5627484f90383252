// A copy of a model changed before the MAX_SLICE_STAMPS (16) files whose stamps its bindings keep:
// no load and no build records it (its stamp ranks last: the store's isSliceStampKept). verify
// --model said "this one's may have been dropped for newer copies … run build to record the file
// now", which a build does not do (review of 4277873); it says why no record is made, in --json and
// in its own note of the text report, and a copy changed later keeps the note that a build helps.
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { MAX_SLICE_STAMPS, openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import type { BuildJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

const FILE = 'model.safetensors';
const pause = () => new Promise((resolve) => setTimeout(resolve, 20)); // later copies get later ctimes

/** Copy `n` of the model, in a directory of its own (one shard name for all): its path. */
async function makeCopy(source: string, n: number): Promise<string> {
  const dir = join(temp.path, `copy${n}`);
  await mkdir(dir, { recursive: true });
  await copyFile(source, join(dir, FILE));
  await pause();
  return join(dir, FILE);
}

it('a copy changed before the 16 files whose stamps its bindings keep: ok, stampNotKept, why no build records it; a build changes nothing', async () => {
  const source = await writeSingleFileModel(join(temp.path, FILE), [0, 1].map((i) => gaussianBf16(`t${i}.weight`, [64, 64], 811 + i)));
  const first = await makeCopy(source, 0);
  const cacheDir = join(temp.path, 'cache');
  await runJson<BuildJson>(['build', first, '--out', cacheDir]);
  // MAX_SLICE_STAMPS newer copies, each recorded as a load records it (its stamp with each binding).
  const store = await openCacheStore(cacheDir);
  try {
    for (let n = 1; n <= MAX_SLICE_STAMPS; n++) {
      const model = await openSafetensorsModel(await makeCopy(source, n));
      try {
        const items = model.tensors.map((t) => ({ key: store.lookupSliceBinding(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)!.entry.key, ...t.slice, stamp: model.shards[0]!.stamp! }));
        expect(await store.aliasSlices(items)).toEqual(items.map(() => true));
      } finally {
        await model.close();
      }
    }
  } finally {
    await store.close();
  }
  const NOT_KEPT = /its binding has no record of this shard file \(\d+ bytes, modified .*\), and none is made: it changed before the 16 files whose stamps the binding keeps \(MAX_SLICE_STAMPS: the files changed most recently keep the slots\), so neither a load nor a build records it; .*a cache of its own for these files avoids it/;
  for (let pass = 0; pass < 2; pass++) {
    const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', first]);
    expect(json.ok).toBe(true);
    for (const tensor of json.model!.tensors) {
      expect(tensor, tensor.name).toMatchObject({ status: 'ok', unrecorded: true, stampNotKept: true });
      expect(tensor.reason).toMatch(NOT_KEPT);
      expect(tensor.reason).not.toMatch(/run build|dropped for newer copies/);
    }
    const text = await runCli(['verify', cacheDir, '--model', first]);
    expect(text.code).toBe(0);
    expect(text.stdout.replace(/\n {4,}(?=\S)/g, ' ')).toMatch(
      /^ {2}note: cached, but never recorded: each file changed before the 16 files whose stamps its binding keeps \(MAX_SLICE_STAMPS: the files changed most recently keep the slots\), so every new process checks their bytes once and a build does not record them \(a cache of its own for these files avoids it\): model\.safetensors: 2 tensors$/m, // wrapped lines joined
    );
    expect(text.stdout).not.toMatch(/`splitzip build` records it/);
    // A build of that copy records nothing (its stamps rank last): it reports no slice aliased
    // (it counted 2, review of 1ee46ea), and the second pass says the same.
    const build = await runJson<BuildJson>(['build', first, '--out', cacheDir]);
    expect(build.json).toMatchObject({ aliased: 0 });
  }
  // A copy changed after all of them is recorded by a build: its note says so, as before.
  const latest = await makeCopy(source, MAX_SLICE_STAMPS + 1);
  const { json } = await runJson<VerifyJson>(['verify', cacheDir, '--model', latest]);
  for (const tensor of json.model!.tensors) {
    expect(tensor, tensor.name).toMatchObject({ status: 'ok', unrecorded: true });
    expect(tensor.stampNotKept).toBeUndefined();
    expect(tensor.reason).toMatch(/run build to record the file now/);
  }
  expect((await runCli(['verify', cacheDir, '--model', latest])).stdout).toMatch(/note: cached, but no record of the file as it is now \(a load checks their bytes once; `splitzip build` records it\)/);
});
