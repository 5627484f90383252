// Two revisions of one model in a Hugging Face hub cache (models--org--name/snapshots/<rev>/<shard>
// -> ../../blobs/<sha256>, as huggingface_hub lays them out), built into one shared cache: their
// shards have the same names, and each revision's file is another inode. Shard stamps alone cannot
// tell "another revision, still here" from "this revision's file replaced by a download"; the
// repository's blobs/ can. gc --model / inspect --model of one revision keep the other's bindings
// (`otherRevision`) while its file is in blobs/ and remove them once it is gone; a build's
// SLICE_CONFLICT and its warning name the other revision instead of "a new revision downloaded".
// In plain model directories another file's bindings are kept (`otherFileKept`: the stamps cannot
// tell another revision from a replaced file, and a directory cache keeps a binding per file).
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { bindBeside } from './helpers/bind-beside.js';
import { runInProcess as run } from './helpers/run-in-process.js';

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-hub-other-revision-');
});
afterAll(async () => temp?.cleanup());

const REV_A = 'a'.repeat(40);
const REV_B = 'b'.repeat(40);
// Shard 1: t0 t1 t2, shard 2: t3 t4 t5 (each 8 KiB; 26 KiB a shard). B's t0 is larger (t1 and t2
// move within shard 1, as a vocabulary resize moves them) and its t4 other bytes of t4's shape.
const MAX_SHARD_BYTES = 3 * 8192 + 2048;
const base = (i: number) => gaussianBf16(`t${i}.weight`, [64, 64], 100 + i);
const TENSORS_A = [0, 1, 2, 3, 4, 5].map(base);
const TENSORS_B = TENSORS_A.map((tensor, i) => (i === 0 ? gaussianBf16('t0.weight', [72, 64], 100) : i === 4 ? gaussianBf16('t4.weight', [64, 64], 500) : tensor));

/** Both revisions as plain directories, and as a hub repository of two snapshots linking blobs/. */
async function writeRevisions(root: string): Promise<{ plainA: string; plainB: string; repo: string; snapA: string; snapB: string }> {
  const plainA = join(root, 'plain', 'A');
  const plainB = join(root, 'plain', 'B');
  await writeShardedTestModel(plainA, TENSORS_A, MAX_SHARD_BYTES);
  await writeShardedTestModel(plainB, TENSORS_B, MAX_SHARD_BYTES);
  const repo = join(root, 'hub', 'models--org--name');
  await mkdir(join(repo, 'blobs'), { recursive: true });
  await mkdir(join(repo, 'refs'), { recursive: true });
  for (const [revision, source] of [[REV_A, plainA], [REV_B, plainB]] as const) {
    const snapshot = join(repo, 'snapshots', revision);
    await mkdir(snapshot, { recursive: true });
    for (const name of await readdir(source)) {
      const bytes = await readFile(join(source, name));
      const hash = createHash('sha256').update(bytes).digest('hex');
      await writeFile(join(repo, 'blobs', hash), bytes, { flag: 'w' });
      await symlink(`../../blobs/${hash}`, join(snapshot, name));
    }
  }
  await writeFile(join(repo, 'refs', 'main'), REV_B);
  return { plainA, plainB, repo, snapA: join(repo, 'snapshots', REV_A), snapB: join(repo, 'snapshots', REV_B) };
}

async function judge(cache: string, model: string, extra: string[] = []): Promise<ModelBindingsReport> {
  const result = await run(['gc', cache, '--model', model, '--json', ...extra]);
  expect(result.code, result.err).toBe(0);
  return (JSON.parse(result.out) as { bindings: ModelBindingsReport }).bindings;
}

/** `a` built into `cache`, then `b`'s bindings beside (one binding per file: FILE-BINDINGS.md). */
async function buildBoth(cache: string, a: string, b: string): Promise<void> {
  expect((await run(['build', a, '--out', cache, '--quiet'])).code).toBe(0);
  await bindBeside(cache, b, `${cache}-scratch-b`);
}

describe('two revisions of a hub repository in one cache', () => {
  it("gc --model of one snapshot keeps the other's bindings while its file is in blobs/; once it is gone, only --prune-other-files removes them (a model outside the hub tree may hold that file)", async () => {
    const models = await writeRevisions(join(temp.path, 'gc'));
    const cache = join(temp.path, 'cache-gc');
    await buildBoth(cache, models.snapA, models.snapB);
    const dry = await judge(cache, models.snapA, ['--dry-run']);
    // A's six live (B's beside, one binding per file); B's three shard-1 bindings (at spans A does not have) and its t4 (at A's span, of its shape): B's, not A's leftovers.
    expect(dry).toMatchObject({ live: 6, unchecked: 0, leftover: 0, mismatched: 0, superseded: 0, otherRevision: 4, otherFiles: 0, prune: [] });
    expect(dry.otherRevisions.map((group) => [group.shardName, group.bindings, group.snapshots])).toEqual(
      expect.arrayContaining([
        ['model-00001-of-00002.safetensors', 3, [REV_B]],
        ['model-00002-of-00002.safetensors', 1, [REV_B]],
      ]),
    );
    const text = await run(['inspect', cache, '--model', models.snapA]);
    expect(text.code, text.err).toBe(0);
    const joined = text.out.replace(/\n +/g, ' ');
    expect(joined).toContain("6 live, 0 unchecked, 4 another revision's (kept)");
    expect(joined).toContain(`recorded from another revision of this Hugging Face hub repository`);
    expect(joined).toContain(`(snapshots/${REV_B} still links it)`);
    expect(joined).not.toContain('a load checks each once and keeps it');

    const gc = await run(['gc', cache, '--model', models.snapA]);
    expect(gc.code, gc.err).toBe(0);
    // B keeps every binding: its loads serve all six tensors from the cache.
    expect(await judge(cache, models.snapB, ['--dry-run'])).toMatchObject({ live: 6, unchecked: 0, otherRevision: 4, prune: [] });

    // Revision B deleted (huggingface-cli delete-cache: its snapshot and blobs): its bindings are left behind now.
    for (const name of await readdir(models.snapB)) {
      await rm(join(models.snapB, await readlink(join(models.snapB, name))));
    }
    await rm(models.snapB, { recursive: true });
    // Gone from blobs/: kept as another file's (until 0.56's release judged and removed: a probe's
    // gc of a snapshot removed the bindings of plain-directory models of the same shard names).
    const kept = await judge(cache, models.snapA);
    expect(kept).toMatchObject({ otherRevision: 0, otherFileKept: 4, leftover: 0, superseded: 0, otherFiles: 0, removed: 0 });
    const after = await judge(cache, models.snapA, ['--prune-other-files']);
    // Its t4 at A's span is superseded by A's own binding there.
    expect(after).toMatchObject({ otherRevision: 0, leftover: 3, superseded: 1, otherFiles: 4, removed: 4 });
  });

  it("plain directories of the same revisions: the other's bindings are kept as other files' (one binding per file; judged left behind before 0.56)", async () => {
    const models = await writeRevisions(join(temp.path, 'plain'));
    const cache = join(temp.path, 'cache-plain');
    await buildBoth(cache, models.plainA, models.plainB);
    expect(await judge(cache, models.plainA, ['--dry-run'])).toMatchObject({ live: 6, unchecked: 0, leftover: 0, otherFileKept: 4, otherRevision: 0, otherRevisions: [], otherFiles: 0, prune: [] });
  });

  it('a plain build of the other snapshot binds beside the first (0.56: it failed SLICE_CONFLICT, after a warning), and so in plain directories', async () => {
    const models = await writeRevisions(join(temp.path, 'conflict'));
    for (const [name, a, b] of [['hub', models.snapA, models.snapB], ['plain', models.plainA, models.plainB]] as const) {
      const cache = join(temp.path, `cache-conflict-${name}`);
      expect((await run(['build', a, '--out', cache, '--quiet'])).code).toBe(0);
      const second = await run(['build', b, '--out', cache, '--json']);
      expect(second.code, second.out).toBe(0);
      expect(second.err).toBe('');
      // B's t0 (resized) and t4 are new entries; t1, t2 (moved: A's bytes at B's spans), t3, t5 A's, bound for B's file too.
      expect(JSON.parse(second.out)).toMatchObject({ encoded: 2, cached: 4, aliased: 6, rebound_other_files: 0, cache_format_moved: true });
    }
  });
});
