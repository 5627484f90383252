// Hub trees the first other-revision judging (hub-other-revision.test.ts) got wrong: blobs/ entries
// that are links (huggingface_hub's shared Xet store: <repo>/blobs/<etag> -> a cache-wide blob), a
// model path that is a link to a snapshot, a pipeline's two components whose shards share a name in
// one snapshot (another model, not another revision, not an unreferenced blob), and a blobs/ that
// cannot be listed (bindings from other files kept unjudged, not removed).
import { createHash } from 'node:crypto';
import type * as NodeFs from 'node:fs';
import { chmod, mkdir, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

// As root a mode does not stop readdir: the test makes readdirSync of the repository's blobs/ fail as EACCES would.
const failing = vi.hoisted(() => ({ blobsDir: undefined as string | undefined }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof NodeFs>();
  const readdirSync = ((path: Parameters<typeof fs.readdirSync>[0], ...rest: unknown[]) => {
    if (failing.blobsDir !== undefined && String(path) === failing.blobsDir) throw Object.assign(new Error(`EACCES: permission denied, scandir '${String(path)}'`), { code: 'EACCES' });
    return (fs.readdirSync as (...args: unknown[]) => unknown)(path, ...rest);
  }) as typeof fs.readdirSync;
  return { ...fs, readdirSync, default: { ...fs, readdirSync } };
});

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-hub-other-revision-links-');
});
afterAll(async () => {
  failing.blobsDir = undefined;
  await temp?.cleanup();
});

const REV_A = 'a'.repeat(40);
const REV_B = 'b'.repeat(40);
const MAX_SHARD_BYTES = 3 * 8192 + 2048;
const base = (i: number) => gaussianBf16(`t${i}.weight`, [64, 64], 100 + i);
const TENSORS_A = [0, 1, 2, 3, 4, 5].map(base);
const TENSORS_B = TENSORS_A.map((tensor, i) => (i === 0 ? gaussianBf16('t0.weight', [72, 64], 100) : i === 4 ? gaussianBf16('t4.weight', [64, 64], 500) : tensor));

/** Files of `sources` (snapshot path -> plain file) into a hub repository's blobs/, linked from snapshots/. */
async function writeHubRepo(repo: string, files: [string, string][]): Promise<void> {
  await mkdir(join(repo, 'blobs'), { recursive: true });
  for (const [inRepo, source] of files) {
    const bytes = await readFile(source);
    const hash = createHash('sha256').update(bytes).digest('hex');
    await writeFile(join(repo, 'blobs', hash), bytes);
    await mkdir(join(repo, inRepo, '..'), { recursive: true });
    const depth = inRepo.split('/').length - 1;
    await symlink(`${'../'.repeat(depth)}blobs/${hash}`, join(repo, inRepo));
  }
}

/** Snapshot `revision` linked again to the blobs of the plain model `source` (its files, by hash). */
async function symlinkSnapshot(repo: string, revision: string, source: string): Promise<void> {
  await mkdir(join(repo, 'snapshots', revision));
  for (const name of await readdir(source)) {
    const hash = createHash('sha256').update(await readFile(join(source, name))).digest('hex');
    await symlink(`../../blobs/${hash}`, join(repo, 'snapshots', revision, name));
  }
}

async function writeRevisions(root: string): Promise<{ repo: string; snapA: string; snapB: string }> {
  const plainA = join(root, 'plain', 'A');
  const plainB = join(root, 'plain', 'B');
  await writeShardedTestModel(plainA, TENSORS_A, MAX_SHARD_BYTES);
  await writeShardedTestModel(plainB, TENSORS_B, MAX_SHARD_BYTES);
  const repo = join(root, 'hub', 'models--org--name');
  const files: [string, string][] = [];
  for (const [revision, source] of [[REV_A, plainA], [REV_B, plainB]] as const) {
    for (const name of await readdir(source)) files.push([`snapshots/${revision}/${name}`, join(source, name)]);
  }
  await writeHubRepo(repo, files);
  return { repo, snapA: join(repo, 'snapshots', REV_A), snapB: join(repo, 'snapshots', REV_B) };
}

async function judge(cache: string, model: string, extra: string[] = []): Promise<ModelBindingsReport> {
  const result = await run(['gc', cache, '--model', model, '--json', ...extra]);
  expect(result.code, result.err).toBe(0);
  return (JSON.parse(result.out) as { bindings: ModelBindingsReport }).bindings;
}

async function buildBoth(cache: string, a: string, b: string): Promise<void> {
  expect((await run(['build', a, '--out', cache, '--quiet'])).code).toBe(0);
  const rebound = await run(['build', b, '--out', cache, '--quiet', '--rebind']);
  expect(rebound.code, rebound.err).toBe(0);
}

const groups = (report: ModelBindingsReport) => report.otherRevisions.map((group) => [group.shardName, group.bindings, group.snapshots]);
const B_GROUPS = [
  ['model-00001-of-00002.safetensors', 3, [REV_B]],
  ['model-00002-of-00002.safetensors', 1, [REV_B]],
];

describe('hub trees of links and shared names', () => {
  it("blobs/ entries that are links (huggingface_hub's shared Xet store) are judged by their targets", async () => {
    const root = join(temp.path, 'xet');
    const models = await writeRevisions(root);
    // <hub>/blobs/<xx>/<hash> the files, <repo>/blobs/<hash> relative links to them (_shared_blobs.py).
    for (const name of await readdir(join(models.repo, 'blobs'))) {
      const shared = join(root, 'hub', 'blobs', name.slice(0, 2));
      await mkdir(shared, { recursive: true });
      await rename(join(models.repo, 'blobs', name), join(shared, name));
      await symlink(`../../blobs/${name.slice(0, 2)}/${name}`, join(models.repo, 'blobs', name));
    }
    const cache = join(temp.path, 'cache-xet');
    await buildBoth(cache, models.snapA, models.snapB);
    const dry = await judge(cache, models.snapA, ['--dry-run']);
    expect(dry).toMatchObject({ leftover: 0, unchecked: 0, otherRevision: 4, prune: [] });
    expect(groups(dry)).toEqual(expect.arrayContaining(B_GROUPS));
  });

  it('a model path that links to a snapshot names the snapshots linking the other revision', async () => {
    const models = await writeRevisions(join(temp.path, 'linked'));
    const link = join(temp.path, 'linked', 'my-model');
    await symlink(models.snapA, link);
    const cache = join(temp.path, 'cache-linked');
    await buildBoth(cache, link, models.snapB);
    const dry = await judge(cache, link, ['--dry-run']);
    expect(dry).toMatchObject({ leftover: 0, otherRevision: 4 });
    expect(groups(dry)).toEqual(expect.arrayContaining(B_GROUPS));
    const text = (await run(['inspect', cache, '--model', link])).out.replace(/\n +/g, ' ');
    expect(text).toContain(`(snapshots/${REV_B} still links it)`);
    expect(text).not.toContain('unreferenced');
  });

  it("a pipeline's components sharing a shard name in one snapshot are another model, not another revision or an unreferenced blob", async () => {
    const root = join(temp.path, 'pipe');
    const rev = 'd'.repeat(40);
    await mkdir(join(root, 'plain', 'te'), { recursive: true });
    await mkdir(join(root, 'plain', 'te2'), { recursive: true });
    const te = await writeSingleFileModel(join(root, 'plain', 'te', 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16('b.weight', [64, 128], 2), gaussianBf16('c.weight', [128, 64], 3)]);
    const te2 = await writeSingleFileModel(join(root, 'plain', 'te2', 'model.safetensors'), [gaussianBf16('a.weight', [64, 96], 4), gaussianBf16('b.weight', [96, 64], 5), gaussianBf16('c.weight', [64, 64], 6)]);
    const repo = join(root, 'hub', 'models--org--pipe');
    await writeHubRepo(repo, [
      [`snapshots/${rev}/text_encoder/model.safetensors`, te],
      [`snapshots/${rev}/text_encoder_2/model.safetensors`, te2],
    ]);
    const comp1 = join(repo, 'snapshots', rev, 'text_encoder');
    const comp2 = join(repo, 'snapshots', rev, 'text_encoder_2');
    const cache = join(temp.path, 'cache-pipe');
    expect((await run(['build', comp1, '--out', cache, '--quiet'])).code).toBe(0);
    const second = await run(['build', comp2, '--out', cache, '--quiet']);
    expect(second.code, second.err).toBe(0);
    // No warning since 0.56: the other component's bindings are its file's, beside this one's.
    expect(second.err).toBe('');

    const dry = await judge(cache, comp2, ['--dry-run']);
    expect(dry).toMatchObject({ leftover: 0, otherRevision: 3, prune: [] });
    expect(dry.otherRevisions).toEqual([expect.objectContaining({ shardName: 'model.safetensors', bindings: 3, snapshots: [], models: [{ revision: rev, path: join('text_encoder', 'model.safetensors') }] })]);
    const text = (await run(['inspect', cache, '--model', comp2])).out.replace(/\n +/g, ' ');
    expect(text).toContain("3 another model's of the snapshot (kept)");
    expect(text).toContain(`another model of snapshot ${rev} (text_encoder/model.safetensors) links it`);
    expect(text).not.toContain('unreferenced');
    expect(text).not.toContain('delete-cache');
    expect(text).not.toContain("another revision's");
  });

  it('a blobs/ that cannot be listed keeps the bindings recorded only with other files, and says so', async () => {
    const models = await writeRevisions(join(temp.path, 'unlisted'));
    const cache = join(temp.path, 'cache-unlisted');
    await buildBoth(cache, models.snapA, models.snapB);
    const blobs = join(models.repo, 'blobs');
    const asRoot = process.getuid?.() === 0;
    // Not root: no read, search kept (the snapshots' links still open their files); root: readdirSync fails as that would.
    if (asRoot) failing.blobsDir = blobs;
    else await chmod(blobs, 0o300);
    try {
      const report = await judge(cache, models.snapA);
      expect(report).toMatchObject({ leftover: 0, removed: 0, otherRevision: 0, blobsUnlisted: { repo: models.repo, code: 'EACCES', bindings: 4 } });
      const text = (await run(['inspect', cache, '--model', models.snapA])).out.replace(/\n +/g, ' ');
      expect(text).toContain("blobs/ could not be listed (EACCES), so whether another revision's file still in it was recorded with them is unknown");
    } finally {
      failing.blobsDir = undefined;
      await chmod(blobs, 0o755);
    }
    // B's bindings all stay: its loads serve its six tensors from the cache.
    expect(await judge(cache, models.snapB, ['--dry-run'])).toMatchObject({ live: 6, unchecked: 0 });
  });

  it("a build of one component binds beside the other's at the same spans (0.56: it failed SLICE_CONFLICT naming the other as another model)", async () => {
    const root = join(temp.path, 'pipe-conflict');
    const rev = 'e'.repeat(40);
    await mkdir(join(root, 'plain', 'te'), { recursive: true });
    await mkdir(join(root, 'plain', 'te2'), { recursive: true });
    // One layout, other bytes: the second component's tensors are at the first's spans.
    const te = await writeSingleFileModel(join(root, 'plain', 'te', 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], 1), gaussianBf16('b.weight', [64, 64], 2)]);
    const te2 = await writeSingleFileModel(join(root, 'plain', 'te2', 'model.safetensors'), [gaussianBf16('a.weight', [64, 64], 7), gaussianBf16('b.weight', [64, 64], 8)]);
    const repo = join(root, 'hub', 'models--org--pipe');
    await writeHubRepo(repo, [
      [`snapshots/${rev}/text_encoder/model.safetensors`, te],
      [`snapshots/${rev}/text_encoder_2/model.safetensors`, te2],
    ]);
    const cache = join(temp.path, 'cache-pipe-conflict');
    expect((await run(['build', join(repo, 'snapshots', rev, 'text_encoder'), '--out', cache, '--quiet'])).code).toBe(0);
    const second = await run(['build', join(repo, 'snapshots', rev, 'text_encoder_2'), '--out', cache, '--json']);
    expect(second.code, second.out).toBe(0);
    expect(second.err).toBe('');
    expect(JSON.parse(second.out)).toMatchObject({ encoded: 2, aliased: 2, rebound_other_files: 0 });
  });

  it("an unreferenced blob is said to be removed with rm, and a cut snapshot list says so", async () => {
    const models = await writeRevisions(join(temp.path, 'unreferenced'));
    const cache = join(temp.path, 'cache-unreferenced');
    await buildBoth(cache, models.snapA, models.snapB);
    // Past MAX_HUB_SNAPSHOTS_SCANNED (1,000): empty snapshots, so B may or may not be among those looked at.
    for (let i = 0; i < 1_001; i++) await mkdir(join(models.repo, 'snapshots', `c${String(i).padStart(39, '0')}`));
    const cut = await judge(cache, models.snapA, ['--dry-run']);
    expect(cut.otherRevision).toBe(4);
    expect(cut.otherRevisions.every((group) => group.snapshotsCut === true)).toBe(true);
    const cutText = (await run(['inspect', cache, '--model', models.snapA])).out.replace(/\n +/g, ' ');
    expect(cutText).toContain('not every snapshot was looked at');
    // A build warns of nothing since 0.56 (the other revision's bindings are its file's).
    expect((await run(['build', models.snapA, '--out', cache, '--quiet'])).err).toBe('');

    // B's snapshot gone, its blobs kept: nothing links them (huggingface-cli delete-cache would not remove them).
    await rm(join(models.repo, 'snapshots'), { recursive: true });
    await mkdir(join(models.repo, 'snapshots'));
    await symlinkSnapshot(models.repo, REV_A, join(temp.path, 'unreferenced', 'plain', 'A'));
    const text = (await run(['inspect', cache, '--model', models.snapA])).out.replace(/\n +/g, ' ');
    const report = await judge(cache, models.snapA, ['--dry-run']);
    expect(report.otherRevision).toBe(4);
    const blobPath = report.otherRevisions[0]!.blobPath;
    expect(blobPath).toBe(join(models.repo, 'blobs', report.otherRevisions[0]!.blob));
    expect(text).toContain(`no file of a snapshot links it now (an unreferenced blob: \`rm ${blobPath}\` removes it)`);
    expect(text).not.toContain('delete-cache removes such revisions');
  });
});
