// gc --model in a directory cache holding an s3:// object revision's bindings (ETag stamps only)
// beside a local file's (FILE-BINDINGS.md phase 3): those are another revision's, kept as a build
// leaves them (isOtherRevisionsBinding), not pruned as `superseded` by this file's own binding.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { OBJECT_STAMP_PREFIX, openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt, runCli } from './helpers/run-cli.js';

let temp: TempDir;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
});
afterAll(async () => temp?.cleanup());

const SHARD = 'model.safetensors';
const ETAG = `${OBJECT_STAMP_PREFIX}"0123456789abcdef0123456789abcdef"`;

/** Every binding of the cache as `offset+size=key[0..8]`, sorted. */
async function bindingsOf(cache: string): Promise<string[]> {
  const store = await openCacheStore(cache);
  try {
    const out: string[] = [];
    for (const entry of store.entries()) for (const [, offset, size] of entry.sliceKeys) out.push(`${offset}+${size}=${entry.key.slice(0, 8)}`);
    return out.sort();
  } finally {
    await store.close();
  }
}

it("gc --model of a local revision keeps an object revision's bindings beside its own", async () => {
  await mkdir(join(temp.path, 'A'));
  await mkdir(join(temp.path, 'B'));
  const a = await writeSingleFileModel(join(temp.path, 'A', SHARD), [gaussianBf16('t0.weight', [64, 64], 1), gaussianBf16('t1.weight', [64, 64], 2)]);
  const b = await writeSingleFileModel(join(temp.path, 'B', SHARD), [gaussianBf16('t0.weight', [64, 64], 3), gaussianBf16('t1.weight', [64, 64], 2)]);
  const cache = join(temp.path, 'cache');
  for (const model of [a, b]) {
    const built = await runCli(['build', model, '--out', cache, '--quiet']);
    expect(built.code, built.stderr).toBe(0);
  }
  // B's own bindings (t0, beside A's) as an s3:// object's: ETag stamps only.
  const store = await openCacheStore(cache, { sliceBindingsPerFile: true });
  try {
    // The slice of t0 holds A's and B's bindings; B's is the one A's file stamp does not find.
    const [s, o, z] = [...store.entries()].flatMap((entry) => entry.sliceKeys).find(([shard, offset, size]) => store.lookupSliceBindings(shard, offset, size).length === 2)!;
    const aKey = store.lookupSliceBinding(s, o, z, await stampOf(a))!.entry.key;
    const bKey = store.lookupSliceBindings(s, o, z).find((binding) => binding.entry.key !== aKey)!.entry.key;
    await store.unbindSlices([{ shardName: s, offsetBytes: o, sizeBytes: z, key: bKey }]);
    expect(await store.aliasSlices([{ key: bKey, shardName: s, offsetBytes: o, sizeBytes: z, stamp: ETAG }])).toEqual([true]);
  } finally {
    await store.close();
  }
  const before = await bindingsOf(cache);
  expect(before).toHaveLength(3);
  const gc = await runCli(['gc', cache, '--model', a, '--json']);
  expect(gc.code, gc.stderr).toBe(0);
  // Before: B's object binding was pruned (`superseded`: A's file has a binding of its own there).
  expect(await bindingsOf(cache)).toEqual(before);
  expect(JSON.parse(gc.stdout).bindings).toMatchObject({ otherFileKept: 1, otherObjectKept: 1 });

  // The texts call it another object revision's (before: "another inode … or this model's file
  // before a save replaced it", and with --prune-other-files "recorded with the file before it changed").
  const flat = (out: string): string => out.replace(/\n {4,}/g, ' ');
  const dry = await runCli(['gc', cache, '--model', a, '--dry-run']);
  expect(dry.code, dry.stderr).toBe(0);
  expect(flat(dry.stdout)).toContain("1 other s3:// object revisions' (kept)");
  expect(flat(dry.stdout)).toContain("kept 1 binding recorded against other revisions of s3:// objects of this model's shard names (ETags: an s3:// model's revisions bound beside this file's)");
  expect(dry.stdout).not.toMatch(/another inode|before a save replaced it/);
  const inspect = await runCli(['inspect', cache, '--model', a, '--prune-other-files']);
  expect(inspect.code, inspect.stderr).toBe(0);
  expect(flat(inspect.stdout)).toContain(`  ${SHARD}: 1 recorded against another revision's s3:// object (an ETag), beside this file's binding now`);
  expect(flat(inspect.stdout)).toContain("1 of them was recorded against other revisions of s3:// objects of that shard name, not this model's files (--prune-other-files: judged as this model's;");
  expect(inspect.stdout).not.toMatch(/recorded with the file before it changed|another inode|replaced files'/);
  const { bindings } = JSON.parse((await runCli(['inspect', cache, '--model', a, '--prune-other-files', '--json'])).stdout) as { bindings: { prune: unknown[] } };
  expect(bindings.prune).toEqual([expect.objectContaining({ verdict: 'superseded', otherFile: true, otherObject: true })]);
});

async function stampOf(path: string): Promise<string> {
  const model = await openSafetensorsModel(path);
  try {
    return model.shards[0]!.stamp!;
  } finally {
    await model.close();
  }
}
