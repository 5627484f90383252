// In a Hugging Face hub cache (`models--org--name/snapshots/<rev>/<shard> -> ../../blobs/<sha256>`)
// every revision's shards have the same names, and a download of a new revision is a new blob (a
// new inode): shard stamps alone cannot tell "another revision still here" from "this revision's
// file replaced" (isFromOtherFile). The repository's blobs/ can: a binding recorded with the inode
// (size, mtime) of a file still in blobs/ is that other revision's, in use while a snapshot links
// it. Only blobs/ is looked at (one readdir, one stat per entry: an entry may be a link, to
// huggingface_hub's cache-wide Xet store or to another disk, and is judged by its target), and
// snapshots/ only to name the revisions that link such a blob (one stat per snapshot), or, where none
// links it at this shard's path, the files elsewhere in a snapshot that do, whatever their name (one
// walk of snapshots/ per model): in the shard's own snapshot another model (a diffusers pipeline's
// text_encoder/ and text_encoder_2/ model.safetensors), in another one another revision that kept
// the file at another path. A blob is called unreferenced only after a walk that read every file.
import { readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { parseFileStamp } from '@splitzip/safetensors';
import { HUB_REPO_NAME } from './hub-repo-name.js';
import { quoteForShell } from './quote-for-shell.js';

/**
 * How many directories above a shard are looked at for `snapshots/<rev>`: a shard lies in it or in
 * a pipeline's component directory under it (text_encoder/), 1 to 3 levels; 8 as check-not-hub-repo.
 */
const MAX_SNAPSHOT_LEVELS = 8;
/**
 * How many entries of blobs/ are stat'ed: a repository holds one blob per file of each revision
 * downloaded (a large model's few hundred shards times a few revisions); 10,000 bounds the stats
 * (~10 ms a thousand) of a blobs/ that holds something else. Past it, a binding recorded with a
 * blob not scanned counts as from a file gone, as it did before this scan (gc --model removes it).
 */
export const MAX_HUB_BLOBS_SCANNED = 10_000;
/** How many snapshots are stat'ed to name those that link a blob: past it the names are cut (one stat per snapshot and shard). */
export const MAX_HUB_SNAPSHOTS_SCANNED = 1_000;
/**
 * How many directory entries of snapshots/ are read, over all snapshots, once per model (one stat
 * each: a hub snapshot's files are links into blobs/), to tell which file links a blob no snapshot
 * links at the shard's own path (a pipeline's other component, a revision that moved the file): a
 * snapshot holds a few dozen files (a pipeline's ~10 components of a few each), so 10,000 covers
 * hundreds of snapshots. Past it the walk is cut: a blob it found no file for is not called
 * unreferenced (`snapshotFilesCut`), since a file not read may link it.
 */
export const MAX_HUB_SNAPSHOT_ENTRIES_SCANNED = 10_000;

/** Where a shard lies in a hub repository: the repository and the snapshot directory it is in. */
export interface HubSnapshot {
  repo: string;
  /** The revision directory's name (`snapshots/<rev>`). */
  revision: string;
  snapshotDir: string;
  /** The shard's path under `snapshotDir`: the path given, or its directory's real path where only that lies in a snapshot (a link to a snapshot). */
  shardPath: string;
}

/** Another revision's file that a binding was recorded with, still in the repository's blobs/. */
export interface OtherRevisionFile {
  /** The blob's name in blobs/ (its sha256 for a hub download). */
  blob: string;
  /** Its path (`<repo>/blobs/<blob>`), for the advice to remove an unreferenced one. */
  blobPath: string;
  /** The snapshots (`<rev>` names, sorted) whose file of this shard's path links that blob now; empty where none does. */
  snapshots: string[];
  /** More snapshots than MAX_HUB_SNAPSHOTS_SCANNED: `snapshots` may lack some. */
  snapshotsCut?: true;
  /**
   * Where no snapshot links it at this shard's path: the files at another path of the shard's own
   * snapshot that link it (`<rev>` and the path in it, whatever their name), another model of that
   * snapshot (a pipeline's component sharing the shard name).
   */
  models?: { revision: string; path: string }[];
  /**
   * Where no snapshot links it at this shard's path and no other file of its own snapshot does: the
   * files of other snapshots at other paths that link it (an older revision that kept the file
   * elsewhere: `model.safetensors` at the root, now under `weights/`), another revision's.
   */
  atOtherPaths?: { revision: string; path: string }[];
  /**
   * Not every file of the snapshots was looked at (MAX_HUB_SNAPSHOT_ENTRIES_SCANNED, more than
   * MAX_HUB_SNAPSHOTS_SCANNED snapshots, a directory that could not be read): where nothing found
   * links the blob, a file not looked at may, so it is not called unreferenced.
   */
  snapshotFilesCut?: true;
}

/** Why blobs/ of a hub repository could not be listed (its error's code), where it could not. */
export interface HubBlobsUnlisted {
  repo: string;
  code: string;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function findSnapshotAbove(dir: string, file: string): HubSnapshot | undefined {
  let current = dir;
  for (let level = 0; level < MAX_SNAPSHOT_LEVELS; level++) {
    const parent = dirname(current);
    if (parent === current) return undefined;
    const repo = dirname(parent);
    if (basename(parent) === 'snapshots' && HUB_REPO_NAME.test(basename(repo)) && isDirectory(join(repo, 'blobs'))) {
      return { repo, revision: basename(current), snapshotDir: current, shardPath: join(dir, file) };
    }
    current = parent;
  }
  return undefined;
}

/**
 * The hub snapshot a shard file (its path as the model names it, a link into blobs/) lies in, at
 * most MAX_SNAPSHOT_LEVELS up, its directory's real path tried too; undefined outside a hub repository.
 */
export function findHubSnapshot(shardPath: string): HubSnapshot | undefined {
  const dir = dirname(shardPath);
  const found = findSnapshotAbove(dir, basename(shardPath));
  if (found !== undefined) return found;
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return undefined;
  }
  return real === dir ? undefined : findSnapshotAbove(real, basename(shardPath));
}

interface BlobFile {
  name: string;
  dev: bigint;
  size: bigint;
  mtimeNs: bigint;
}

/**
 * The files of `repo`/blobs by inode number (at most MAX_HUB_BLOBS_SCANNED stat'ed): an entry that
 * is a link counts as its target (huggingface_hub's Xet store links `<repo>/blobs/<etag>` to a
 * cache-wide blob; a blob moved to another disk is linked back), as a shard's stamp does. `code`
 * where blobs/ could not be listed.
 */
function scanBlobs(repo: string): { byInode: Map<bigint, BlobFile[]>; code?: string } {
  const byInode = new Map<bigint, BlobFile[]>();
  const dir = join(repo, 'blobs');
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    return { byInode, code: (error as NodeJS.ErrnoException).code ?? 'UNKNOWN' };
  }
  for (const name of names.slice(0, MAX_HUB_BLOBS_SCANNED)) {
    try {
      const info = statSync(join(dir, name), { bigint: true });
      if (!info.isFile()) continue;
      byInode.set(info.ino, [...(byInode.get(info.ino) ?? []), { name, dev: info.dev, size: info.size, mtimeNs: info.mtimeNs }]);
    } catch {
      // Removed since the listing, a dangling or looping link, or a target not readable: no file here.
    }
  }
  return { byInode };
}

/** For one model's shards (createOtherRevisionFinder). */
export interface OtherRevisionFinder {
  /**
   * Of a binding's recorded stamps, the other file (still in the repository's blobs/) one of them
   * names by inode, size and mtime, with what links it; undefined where none does.
   */
  find(shardName: string, recorded: readonly string[]): OtherRevisionFile | undefined;
  /** Where blobs/ could not be listed (after the first find): nothing can be told of the stamps then. */
  unlisted(): HubBlobsUnlisted | undefined;
}

/**
 * For one model's shards: finds the other revision's file (still in the repository's blobs/) a
 * binding was recorded with (a new blob that reused a deleted one's inode number has another mtime).
 * Undefined where the model is not in a hub snapshot: plain directories are judged as before.
 * blobs/ is scanned once, at the first question.
 */
export function createOtherRevisionFinder(shards: readonly { name: string; path: string }[]): OtherRevisionFinder | undefined {
  const first = shards[0];
  const hub = first === undefined ? undefined : findHubSnapshot(first.path);
  if (hub === undefined) return undefined;
  const paths = new Map(shards.map((shard) => [shard.name, shard.path]));
  let blobs: ReturnType<typeof scanBlobs> | undefined;
  // Every snapshot file by the blob it resolves to, read once for all of the model's shards and blobs.
  let files: SnapshotFiles | undefined;
  const linked = new Map<string, OtherRevisionFile>();
  return {
    unlisted: () => (blobs?.code === undefined ? undefined : { repo: hub.repo, code: blobs.code }),
    find(shardName, recorded) {
      blobs ??= scanBlobs(hub.repo);
      for (const stamp of recorded) {
        const fields = parseFileStamp(stamp);
        if (fields?.inode === undefined) continue;
        const blob = blobs.byInode.get(BigInt(fields.inode))?.find((file) => file.size === BigInt(fields.size) && file.mtimeNs === BigInt(fields.mtimeNs));
        if (blob === undefined) continue;
        const id = `${shardName}\n${blob.name}`;
        let found = linked.get(id);
        if (found === undefined) {
          const path = paths.get(shardName);
          const inode = BigInt(fields.inode);
          const own = path === undefined ? undefined : findHubSnapshot(path);
          const linking = own === undefined ? { snapshots: [] } : findSnapshotsLinking(own, inode);
          found = { blob: blob.name, blobPath: join(hub.repo, 'blobs', blob.name), ...linking };
          if (linking.snapshots.length === 0) {
            files ??= indexSnapshotFiles(hub);
            const hits = files.byInode.get(`${blob.dev}:${inode}`) ?? [];
            // Another model only within the shard's own snapshot; a file of another snapshot at another path is another revision's.
            const revision = (own ?? hub).revision;
            const models = hits.filter((hit) => hit.revision === revision);
            const atOtherPaths = hits.filter((hit) => hit.revision !== revision);
            if (models.length > 0) found.models = models;
            else if (atOtherPaths.length > 0) found.atOtherPaths = atOtherPaths;
            if (files.cut) found.snapshotFilesCut = true;
          }
          linked.set(id, found);
        }
        return found;
      }
      return undefined;
    },
  };
}

/** The snapshots whose file at the shard's place in its snapshot (`hub.shardPath`, resolved) is the blob of inode `inode`. */
function findSnapshotsLinking(hub: HubSnapshot, inode: bigint): { snapshots: string[]; snapshotsCut?: true } {
  const inSnapshot = relative(hub.snapshotDir, hub.shardPath);
  const snapshotsDir = join(hub.repo, 'snapshots');
  let revisions: string[];
  try {
    revisions = readdirSync(snapshotsDir);
  } catch {
    return { snapshots: [] };
  }
  const snapshots: string[] = [];
  for (const revision of revisions.slice(0, MAX_HUB_SNAPSHOTS_SCANNED)) {
    try {
      if (statSync(join(snapshotsDir, revision, inSnapshot), { bigint: true }).ino === inode) snapshots.push(revision);
    } catch {
      // No such file in that revision.
    }
  }
  snapshots.sort();
  return revisions.length > MAX_HUB_SNAPSHOTS_SCANNED ? { snapshots, snapshotsCut: true } : { snapshots };
}

/** Every file of a repository's snapshots by the file it resolves to (`<dev>:<ino>`), and whether the walk was cut. */
interface SnapshotFiles {
  byInode: Map<string, { revision: string; path: string }[]>;
  cut: boolean;
}

/** Why a snapshot entry does not resolve to a file: a dangling or looping link, not a file that may be the blob. */
const NOT_A_FILE_CODES = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

/**
 * Every file of every snapshot (at most MAX_HUB_SNAPSHOTS_SCANNED snapshots, MAX_HUB_SNAPSHOT_ENTRIES_SCANNED
 * entries read in all), each stat'ed through its links whatever its name, linked directories followed
 * (each directory once a snapshot: a loop ends), by the file it resolves to: one walk per model.
 * `cut` where some file was not looked at (the bounds, a directory or entry that could not be read).
 */
function indexSnapshotFiles(hub: HubSnapshot): SnapshotFiles {
  const snapshotsDir = join(hub.repo, 'snapshots');
  const byInode = new Map<string, { revision: string; path: string }[]>();
  let budget = MAX_HUB_SNAPSHOT_ENTRIES_SCANNED;
  let revisions: string[];
  try {
    revisions = readdirSync(snapshotsDir).sort();
  } catch {
    return { byInode, cut: true };
  }
  let cut = revisions.length > MAX_HUB_SNAPSHOTS_SCANNED;
  // The shard's own snapshot first: its other models are found whatever the other snapshots hold.
  const ordered = [...revisions.filter((revision) => revision === hub.revision), ...revisions.filter((revision) => revision !== hub.revision)];
  for (const revision of ordered.slice(0, MAX_HUB_SNAPSHOTS_SCANNED)) {
    // A stack, not recursion: a deep tree (linked directories) cannot overflow it; visited ends loops.
    const visited = new Set<string>();
    const stack = [''];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      const absolute = join(snapshotsDir, revision, dir);
      let names: string[];
      try {
        const info = statSync(absolute, { bigint: true });
        const id = `${info.dev}:${info.ino}`;
        if (visited.has(id)) continue;
        visited.add(id);
        names = readdirSync(absolute);
      } catch {
        cut = true;
        continue;
      }
      for (const name of names) {
        if (budget <= 0) return { byInode, cut: true };
        budget -= 1;
        const path = dir === '' ? name : join(dir, name);
        try {
          const info = statSync(join(absolute, name), { bigint: true });
          if (info.isDirectory()) {
            stack.push(path);
          } else if (info.isFile()) {
            const id = `${info.dev}:${info.ino}`;
            byInode.set(id, [...(byInode.get(id) ?? []), { revision, path }]);
          }
        } catch (error) {
          if (!NOT_A_FILE_CODES.has((error as NodeJS.ErrnoException).code ?? '')) cut = true;
        }
      }
    }
  }
  return { byInode, cut };
}

/** What linked the blob, for the texts (OtherRevisionFile, or those of a shard name summed). */
export type LinkingFiles = Pick<OtherRevisionFile, 'snapshots' | 'snapshotsCut' | 'models' | 'atOtherPaths' | 'snapshotFilesCut'> & { blobPaths?: readonly string[] };

/** Whether the file is another model's of the shard's own snapshot (a pipeline's component of the same shard name), not another revision's. */
export function isOtherModel(found: LinkingFiles): boolean {
  return found.snapshots.length === 0 && (found.models?.length ?? 0) > 0;
}

/** `another model of snapshot <rev> (<path>)` (the first; `and N more`), for an isOtherModel file. */
export function describeOtherModel(found: LinkingFiles): string {
  const [first, ...rest] = found.models ?? [];
  if (first === undefined) return 'another model';
  return `another model of snapshot ${first.revision} (${first.path})${rest.length > 0 ? ` and ${rest.length} more` : ''}`;
}

/** `snapshots/aaaa and snapshots/bbbb` (or that another model of a snapshot, another revision's file at another path, or nothing, links it now), for the texts. */
export function describeLinkingSnapshots(found: LinkingFiles): string {
  if (isOtherModel(found)) return `${describeOtherModel(found)} links it`;
  const [moved, ...more] = found.snapshots.length === 0 ? (found.atOtherPaths ?? []) : [];
  if (moved !== undefined) return `another revision (file at ${moved.path} of snapshots/${moved.revision}${more.length > 0 ? `, and ${more.length} more` : ''}) links it`;
  if (found.snapshots.length === 0 && found.snapshotsCut) return 'no snapshot looked at links it (and maybe others do: not every snapshot was looked at)';
  if (found.snapshots.length === 0 && found.snapshotFilesCut) {
    // A file not read may link it: no advice to remove it.
    return 'no snapshot file looked at links it (not every snapshot file was looked at: it may be in use; `huggingface-cli scan-cache -v` lists the revisions)';
  }
  if (found.snapshots.length === 0) {
    // huggingface-cli delete-cache removes the blobs of the revisions it deletes only: not a blob no revision has.
    const paths = found.blobPaths ?? [];
    return `no file of a snapshot links it now (an unreferenced blob${paths.length > 0 ? `: \`rm ${paths.map(quoteForShell).join(' ')}\` removes it` : ''})`;
  }
  const names = found.snapshots.map((revision) => `snapshots/${revision}`);
  const list = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]!}`;
  return `${list}${found.snapshotsCut ? ' (and maybe others: not every snapshot was looked at)' : ''} still ${names.length === 1 ? 'links' : 'link'} it`;
}
