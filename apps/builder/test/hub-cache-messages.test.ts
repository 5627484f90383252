// A model in a Hugging Face hub cache (`models--org--name/{blobs/<sha256>, snapshots/<rev>/<name> ->
// ../../blobs/<sha256>, refs/main}`) given the wrong way, or not fully downloaded: each line says
// what the path is in hub terms and names the snapshot to give instead.
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { assertBuilt, runCli } from './helpers/run-cli.js';

const REVISION = 'a1'.repeat(20);
let temp: TempDir;
let repo: string;
let snapshot: string;
/** The blob each snapshot file links to, by file name. */
const blobOf = new Map<string, string>();

beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  const staged = join(temp.path, 'staged');
  await writeShardedTestModel(staged, [gaussianBf16('w0', [64, 64], 1), gaussianBf16('w1', [64, 64], 2), gaussianBf16('w2', [64, 64], 3)], 9000);
  repo = join(temp.path, 'hub', 'models--org--name');
  snapshot = join(repo, 'snapshots', REVISION);
  await mkdir(join(repo, 'blobs'), { recursive: true });
  await mkdir(join(repo, 'refs'));
  await mkdir(snapshot, { recursive: true });
  for (const name of await readdir(staged)) {
    const sha = createHash('sha256').update(await readFile(join(staged, name))).digest('hex');
    await rename(join(staged, name), join(repo, 'blobs', sha));
    await symlink(join('..', '..', 'blobs', sha), join(snapshot, name));
    blobOf.set(name, sha);
  }
  await writeFile(join(repo, 'refs', 'main'), REVISION);
});
afterAll(async () => temp?.cleanup());

function expectOneLine(result: { code: number | null; stderr: string }, command: string): string {
  expect(result.code, result.stderr).toBe(1);
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^splitzip ${command}: error: `));
  return lines[0]!;
}

describe('hub cache layouts', () => {
  it('a snapshot shard whose blob is still downloading: the link and its missing target are named, and the unfinished download', async () => {
    const shard = (await readdir(snapshot)).filter((name) => name.endsWith('.safetensors')).sort()[1]!;
    const blob = join(repo, 'blobs', blobOf.get(shard)!);
    await rename(blob, `${blob}.incomplete`);
    try {
      const said = `is a symbolic link to "../../blobs/${blobOf.get(shard)}" ("${blob}"), which does not exist (ENOENT); "${blobOf.get(shard)}.incomplete" lies beside that target: its download is unfinished`;
      const whole = expectOneLine(await runCli(['build', snapshot, '--out', join(temp.path, 'out1')]), 'build');
      expect(whole).toContain(`INDEX_SHARD_MISSING: `);
      expect(whole).toContain(`shard "${shard}" ${said}`);
      const alone = expectOneLine(await runCli(['build', join(snapshot, shard), '--out', join(temp.path, 'out2')]), 'build');
      expect(alone).toContain(`PATH_NOT_FOUND: ${join(snapshot, shard)}: no such file: it ${said}`);
    } finally {
      await rename(`${blob}.incomplete`, blob);
    }
  });

  it('a dangling link with no download beside it: the link and its target, no download named', async () => {
    const link = join(temp.path, 'dangling.safetensors');
    await symlink('gone.safetensors', link);
    const line = expectOneLine(await runCli(['stats', link]), 'stats');
    expect(line).toContain(`PATH_NOT_FOUND: ${link}: no such file: it is a symbolic link to "gone.safetensors" ("${join(temp.path, 'gone.safetensors')}"), which does not exist (ENOENT)`);
    expect(line).not.toContain('download');
  });

  it('a loop of symbolic links, as a snapshot shard and as the model: said to be a loop, not a missing file', async () => {
    const shard = (await readdir(snapshot)).filter((name) => name.endsWith('.safetensors')).sort()[0]!;
    const path = join(snapshot, shard);
    await rm(path);
    await symlink(shard, path);
    try {
      const whole = expectOneLine(await runCli(['build', snapshot, '--out', join(temp.path, 'out3')]), 'build');
      expect(whole).toContain(`shard "${shard}" is a loop of symbolic links (it links to "${shard}", and following the links never reaches a file) (ELOOP)`);
      expect(whole).not.toContain('does not exist');
    } finally {
      await rm(path);
      await symlink(join('..', '..', 'blobs', blobOf.get(shard)!), path);
    }
    const a = join(temp.path, 'loop-a');
    await symlink('loop-b', a);
    await symlink('loop-a', join(temp.path, 'loop-b'));
    const alone = expectOneLine(await runCli(['stats', a]), 'stats');
    expect(alone).toContain(`IO_ERROR: ${a}: it is a loop of symbolic links (it links to "loop-b", and following the links never reaches a file) (ELOOP)`);
  });

  it('the repository directory or its refs/ given as the model: named as such, with the snapshot refs/main names', async () => {
    const hint = `its model files are in snapshots/<rev> (one directory per revision); refs/main names snapshots/${REVISION}: open (or build) ${snapshot}`;
    const atRepo = expectOneLine(await runCli(['build', repo, '--out', join(temp.path, 'out4')]), 'build');
    expect(atRepo).toBe(`splitzip build: error: NOT_SAFETENSORS: ${repo}: directory holds no .safetensors file and no index; it is a Hugging Face hub repository: ${hint}`);
    const atRefs = expectOneLine(await runCli(['stats', join(repo, 'refs')]), 'stats');
    expect(atRefs).toBe(`splitzip stats: error: NOT_SAFETENSORS: ${join(repo, 'refs')}: directory holds no .safetensors file and no index; it is the refs/ of a Hugging Face hub repository: ${hint}`);
  });

  it('refs/main given as the model: a hub ref naming its snapshot, not a Git LFS pointer', async () => {
    const line = expectOneLine(await runCli(['build', join(repo, 'refs', 'main'), '--out', join(temp.path, 'out5')]), 'build');
    expect(line).toBe(`splitzip build: error: HEADER_TOO_LARGE: ${join(repo, 'refs', 'main')}: it is not a model file but a Hugging Face hub ref naming revision ${REVISION}: open (or build) ${snapshot}`);
    // A revision file anywhere else: still a ref, its repository not known.
    const loose = join(temp.path, 'main');
    await writeFile(loose, `${REVISION}\n`);
    const elsewhere = expectOneLine(await runCli(['stats', loose]), 'stats');
    expect(elsewhere).toContain(`it is not a model file but a Hugging Face hub ref naming revision ${REVISION}: the model is the snapshots/${REVISION} directory of its repository`);
    expect(elsewhere).not.toContain('Git LFS');
  });

  it('build --out the hub repository itself: USAGE naming why, nothing written there; a cache that holds refs/ and snapshots/ is still built into', async () => {
    const before = (await readdir(repo)).sort();
    const blobs = (await readdir(join(repo, 'blobs'))).sort();
    const line = `option '--out' ${repo} is a Hugging Face hub repository (it holds refs/ and snapshots/): the cache's files would land among the hub's, its payloads in the hub's blobs/; give a directory of its own (outside the hub cache)`;
    const result = await runCli(['build', snapshot, '--out', repo]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toBe(`splitzip build: ${line}\nRun 'splitzip build --help' for usage.\n`);
    const json = await runCli(['build', snapshot, '--out', repo, '--json']);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout).error).toEqual({ code: 'USAGE', message: line, file: repo, reason: 'out-is-hub-repo' });
    expect((await readdir(repo)).sort()).toEqual(before);
    expect((await readdir(join(repo, 'blobs'))).sort()).toEqual(blobs);
    // An existing cache is the store's to judge, whatever else it holds.
    const cache = join(temp.path, 'cache');
    expect((await runCli(['build', snapshot, '--out', cache])).code).toBe(0);
    await mkdir(join(cache, 'refs'));
    await mkdir(join(cache, 'snapshots'));
    const again = await runCli(['build', snapshot, '--out', cache]);
    expect(again.code, again.stderr).toBe(0);
  });

  it('build --out inside the hub repository (a snapshot, blobs/, refs/, a new directory deeper, a link into it): USAGE naming the repository, nothing written there; a directory merely holding refs/ and snapshots/ above is built under', async () => {
    const real = await realpath(repo);
    const link = join(temp.path, 'into-hub');
    await symlink(join(repo, 'snapshots'), link);
    const listing = async (): Promise<string[]> => (await readdir(repo, { recursive: true })).sort();
    const before = await listing();
    for (const out of [snapshot, join(repo, 'blobs'), join(repo, 'refs'), join(snapshot, 'new', 'deeper'), join(repo, 'snapshots', 'b2'.repeat(20)), join(link, 'cache')]) {
      const line = `option '--out' ${out} lies inside the Hugging Face hub repository ${real} (it holds refs/ and snapshots/): the cache's files would land among the hub's; give a directory of its own (outside the hub cache)`;
      const result = await runCli(['build', snapshot, '--out', out]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toBe(`splitzip build: ${line}\nRun 'splitzip build --help' for usage.\n`);
      const json = await runCli(['build', snapshot, '--out', out, '--json']);
      expect(json.code).toBe(2);
      expect(JSON.parse(json.stdout).error).toEqual({ code: 'USAGE', message: line, file: out, reason: 'out-in-hub-repo', hubRepo: real });
    }
    expect(await listing()).toEqual(before);
    // Not named as the hub names a repository: a project's own refs/ and snapshots/ refuse nothing under it.
    const project = join(temp.path, 'project');
    await mkdir(join(project, 'refs'), { recursive: true });
    await mkdir(join(project, 'snapshots'));
    const built = await runCli(['build', snapshot, '--out', join(project, 'snapshots', 'cache')]);
    expect(built.code, built.stderr).toBe(0);
  });
});
