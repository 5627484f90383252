// Which snapshot file links a blob no snapshot links at the shard's own path (find-other-revision.ts,
// one walk of snapshots/ per model): another model of the shard's own snapshot, another revision that
// kept the file at another path or name (a linked directory followed), and an unreferenced blob only
// after a walk that read every snapshot file: past MAX_HUB_SNAPSHOT_ENTRIES_SCANNED no `rm` advice.
import { createHash } from 'node:crypto';
import type * as NodeFs from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ModelBindingsReport } from '../src/judge-model-bindings.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { runInProcess as run } from './helpers/run-in-process.js';

// Counts the listings of one directory (readdirSync): the snapshot walk is read once per model, not once per blob.
const listings = vi.hoisted(() => ({ dir: undefined as string | undefined, count: 0 }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof NodeFs>();
  const readdirSync = ((path: Parameters<typeof fs.readdirSync>[0], ...rest: unknown[]) => {
    if (listings.dir !== undefined && String(path) === listings.dir) listings.count += 1;
    return (fs.readdirSync as (...args: unknown[]) => unknown)(path, ...rest);
  }) as typeof fs.readdirSync;
  return { ...fs, readdirSync, default: { ...fs, readdirSync } };
});

let temp: TempDir;
beforeAll(async () => {
  temp = await createTempDir('splitzip-hub-snapshot-files-');
});
afterAll(async () => {
  await temp?.cleanup();
});

const REV0 = '0'.repeat(40);
const REV1 = '1'.repeat(40);
const REV2 = '2'.repeat(40);
/** More entries than MAX_HUB_SNAPSHOT_ENTRIES_SCANNED (10,000). */
const JUNK_FILES = 10_001;

/** A single-file model (one layout, bytes by `seed`) written into `repo`/blobs and linked from `inRepo` (relative link). */
async function linkModel(repo: string, inRepo: string, seed: number): Promise<string> {
  const plain = join(temp.path, 'plain', `${seed}`, 'model.safetensors');
  await mkdir(join(plain, '..'), { recursive: true });
  await writeSingleFileModel(plain, [gaussianBf16('a.weight', [64, 64], seed), gaussianBf16('b.weight', [64, 64], seed + 1), gaussianBf16('c.weight', [64, 64], seed + 2)]);
  const bytes = await readFile(plain);
  const hash = createHash('sha256').update(bytes).digest('hex');
  await mkdir(join(repo, 'blobs'), { recursive: true });
  await writeFile(join(repo, 'blobs', hash), bytes);
  await mkdir(join(repo, inRepo, '..'), { recursive: true });
  await symlink(`${'../'.repeat(inRepo.split('/').length - 1)}blobs/${hash}`, join(repo, inRepo));
  return hash;
}

async function writeJunkSnapshot(repo: string): Promise<void> {
  const dir = join(repo, 'snapshots', REV0, 'many');
  await mkdir(dir, { recursive: true });
  for (let i = 0; i < JUNK_FILES; i++) await writeFile(join(dir, `f${i}`), '');
}

async function judge(cache: string, model: string): Promise<ModelBindingsReport> {
  const result = await run(['gc', cache, '--model', model, '--json', '--dry-run']);
  expect(result.code, result.err).toBe(0);
  return (JSON.parse(result.out) as { bindings: ModelBindingsReport }).bindings;
}

const inspectText = async (cache: string, model: string): Promise<string> => (await run(['inspect', cache, '--model', model])).out.replace(/\n +/g, ' ');

describe('snapshot files linking a blob', () => {
  it("finds another model of the shard's own snapshot however many files other snapshots hold", async () => {
    const repo = join(temp.path, 'pipe', 'hub', 'models--org--pipe');
    await linkModel(repo, `snapshots/${REV1}/text_encoder/model.safetensors`, 10);
    await linkModel(repo, `snapshots/${REV1}/text_encoder_2/model.safetensors`, 20);
    await writeJunkSnapshot(repo);
    const cache = join(temp.path, 'cache-pipe');
    const te = join(repo, 'snapshots', REV1, 'text_encoder');
    const first = await run(['build', join(repo, 'snapshots', REV1, 'text_encoder_2'), '--out', cache, '--quiet']);
    expect(first.code, first.err).toBe(0);
    // Since 0.56 the build binds beside the other component's bindings (it failed SLICE_CONFLICT naming it).
    const second = await run(['build', te, '--out', cache, '--quiet']);
    expect(second.code, second.err).toBe(0);
    expect(second.err).toBe('');
    const report = await judge(cache, te);
    expect(report.otherRevisions).toEqual([expect.objectContaining({ bindings: 3, snapshots: [], models: [{ revision: REV1, path: join('text_encoder_2', 'model.safetensors') }] })]);
  });

  it('offers rm only after a walk that read every snapshot file, whatever the linking file is named or where it lies', async () => {
    const root = join(temp.path, 'moved');
    const repo = join(root, 'hub', 'models--org--moved');
    await linkModel(repo, `snapshots/${REV1}/weights/model.safetensors`, 30);
    const blob = await linkModel(repo, `snapshots/${REV2}/other/model.safetensors`, 40);
    const blobPath = join(repo, 'blobs', blob);
    const cache = join(temp.path, 'cache-moved');
    const built = await run(['build', join(repo, 'snapshots', REV2, 'other'), '--out', cache, '--quiet']);
    expect(built.code, built.err).toBe(0);
    const model = join(repo, 'snapshots', REV1, 'weights');

    // Past MAX_HUB_SNAPSHOT_ENTRIES_SCANNED before REV2 is read: not every file looked at, no rm.
    await writeJunkSnapshot(repo);
    const cut = await judge(cache, model);
    expect(cut.otherRevisions).toEqual([expect.objectContaining({ blob, bindings: 3, snapshots: [], snapshotFilesCut: true })]);
    expect(cut.otherRevisions[0]!.models).toBeUndefined();
    const cutText = await inspectText(cache, model);
    expect(cutText).toContain('not every snapshot file was looked at');
    expect(cutText).not.toContain('unreferenced');
    expect(cutText).not.toContain('`rm ');
    await rm(join(repo, 'snapshots', REV0), { recursive: true });

    // Another revision that kept the file at another path: another revision's, not another model of a snapshot.
    const moved = await judge(cache, model);
    expect(moved.otherRevisions).toEqual([expect.objectContaining({ blob, bindings: 3, snapshots: [], atOtherPaths: [{ revision: REV2, path: join('other', 'model.safetensors') }] })]);
    expect(moved.otherRevisions[0]!.models).toBeUndefined();
    const movedText = await inspectText(cache, model);
    expect(movedText).toContain("3 another revision's (kept)");
    expect(movedText).toContain(`another revision (file at other/model.safetensors of snapshots/${REV2}) links it`);
    expect(movedText).not.toContain('another model');
    expect(movedText).not.toContain('unreferenced');

    // Linked under another name: still that revision's file.
    await rename(join(repo, 'snapshots', REV2, 'other', 'model.safetensors'), join(repo, 'snapshots', REV2, 'other', 'renamed.bin'));
    const renamed = await inspectText(cache, model);
    expect(renamed).toContain(`another revision (file at other/renamed.bin of snapshots/${REV2}) links it`);
    expect(renamed).not.toContain('unreferenced');

    // In a directory the snapshot links to (outside it): the link is followed.
    const outside = join(root, 'outside');
    await mkdir(outside, { recursive: true });
    await rm(join(repo, 'snapshots', REV2, 'other'), { recursive: true });
    await symlink(blobPath, join(outside, 'model.safetensors'));
    await symlink(outside, join(repo, 'snapshots', REV2, 'other'));
    const linkedDir = await inspectText(cache, model);
    expect(linkedDir).toContain(`another revision (file at other/model.safetensors of snapshots/${REV2}) links it`);
    expect(linkedDir).not.toContain('unreferenced');

    // Nothing links it, every file read: an unreferenced blob, rm removes it.
    await rm(join(repo, 'snapshots', REV2), { recursive: true });
    const gone = await inspectText(cache, model);
    expect(gone).toContain(`no file of a snapshot links it now (an unreferenced blob: \`rm ${blobPath}\` removes it)`);
  });

  it('an older revision that kept the file at the root is another revision, not another model of a snapshot', async () => {
    const repo = join(temp.path, 'root-moved', 'hub', 'models--org--root-moved');
    await linkModel(repo, `snapshots/${REV0}/model.safetensors`, 50);
    await linkModel(repo, `snapshots/${REV1}/weights/model.safetensors`, 60);
    const cache = join(temp.path, 'cache-root-moved');
    const built = await run(['build', join(repo, 'snapshots', REV0), '--out', cache, '--quiet']);
    expect(built.code, built.err).toBe(0);
    const model = join(repo, 'snapshots', REV1, 'weights');
    const report = await judge(cache, model);
    expect(report.otherRevisions).toEqual([expect.objectContaining({ bindings: 3, snapshots: [], atOtherPaths: [{ revision: REV0, path: 'model.safetensors' }] })]);
    const text = await inspectText(cache, model);
    expect(text).toContain(`another revision (file at model.safetensors of snapshots/${REV0}) links it`);
    expect(text).not.toContain('another model');
  });

  it("reads the snapshots' files once per model, not once per blob no snapshot links at its shard's path", async () => {
    const root = join(temp.path, 'many-blobs');
    const repo = join(root, 'hub', 'models--org--many');
    const tensors = (seed: number) => [0, 1, 2, 3].map((i) => gaussianBf16(`t${i}.weight`, [64, 64], seed + i));
    for (const [revision, seed] of [[REV0, 100], [REV1, 200]] as const) {
      const plain = join(root, 'plain', revision);
      await writeShardedTestModel(plain, tensors(seed), 8192 + 2048);
      await mkdir(join(repo, 'blobs'), { recursive: true });
      await mkdir(join(repo, 'snapshots', revision), { recursive: true });
      for (const name of await readdir(plain)) {
        const bytes = await readFile(join(plain, name));
        const hash = createHash('sha256').update(bytes).digest('hex');
        await writeFile(join(repo, 'blobs', hash), bytes);
        await symlink(`../../blobs/${hash}`, join(repo, 'snapshots', revision, name));
      }
    }
    const cache = join(temp.path, 'cache-many-blobs');
    const built = await run(['build', join(repo, 'snapshots', REV0), '--out', cache, '--quiet']);
    expect(built.code, built.err).toBe(0);
    // REV0's snapshot gone, its blobs kept: four shards' blobs that no snapshot links.
    await rm(join(repo, 'snapshots', REV0), { recursive: true });
    const model = join(repo, 'snapshots', REV1);
    listings.dir = model;
    listings.count = 0;
    try {
      const report = await judge(cache, model);
      expect(report.otherRevisions).toHaveLength(4);
      expect(listings.count).toBe(1);
    } finally {
      listings.dir = undefined;
    }
  });
});
