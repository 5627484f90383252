// In a Hugging Face hub cache (`models--org--name/snapshots/<rev>/<shard> -> ../../blobs/<sha256>`)
// every revision's shards have the same names, and a download of a new revision is a new blob (a
// new inode): shard stamps alone cannot tell "another revision still here" from "this revision's
// file replaced" (isFromOtherFile). The repository's blobs/ can: a binding recorded with the inode
// (size, mtime) of a file still in blobs/ is that other revision's, in use while a snapshot links
// it. Only blobs/ is looked at (one readdir, one lstat per entry), and snapshots/ only to name the
// revisions that link such a blob (one stat per snapshot).
import { lstatSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { parseFileStamp } from '@splitzip/safetensors';

/**
 * How many directories above a shard are looked at for `snapshots/<rev>`: a shard lies in it or in
 * a pipeline's component directory under it (text_encoder/), 1 to 3 levels; 8 as check-not-hub-repo.
 */
const MAX_SNAPSHOT_LEVELS = 8;
/**
 * How many entries of blobs/ are lstat'ed: a repository holds one blob per file of each revision
 * downloaded (a large model's few hundred shards times a few revisions); 10,000 bounds the stats
 * (~10 ms a thousand) of a blobs/ that holds something else. Past it, a binding recorded with a
 * blob not scanned counts as from a file gone, as it did before this scan (gc --model removes it).
 */
export const MAX_HUB_BLOBS_SCANNED = 10_000;
/** How many snapshots are stat'ed to name those that link a blob: past it the names are cut (one stat per snapshot and shard). */
export const MAX_HUB_SNAPSHOTS_SCANNED = 1_000;
/** How huggingface_hub names a repository's directory (check-not-hub-repo's rule). */
const HUB_REPO_NAME = /^(models|datasets|spaces)--./;

/** Where a shard lies in a hub repository: the repository and the snapshot directory it is in. */
export interface HubSnapshot {
  repo: string;
  /** The revision directory's name (`snapshots/<rev>`). */
  revision: string;
  snapshotDir: string;
}

/** Another revision's file that a binding was recorded with, still in the repository's blobs/. */
export interface OtherRevisionFile {
  /** The blob's name in blobs/ (its sha256 for a hub download). */
  blob: string;
  /** The snapshots (`<rev>` names, sorted) whose file of this shard's path links that blob now; empty where none does. */
  snapshots: string[];
  /** More snapshots than MAX_HUB_SNAPSHOTS_SCANNED: `snapshots` may lack some. */
  snapshotsCut?: true;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function findSnapshotAbove(dir: string): HubSnapshot | undefined {
  let current = dir;
  for (let level = 0; level < MAX_SNAPSHOT_LEVELS; level++) {
    const parent = dirname(current);
    if (parent === current) return undefined;
    const repo = dirname(parent);
    if (basename(parent) === 'snapshots' && HUB_REPO_NAME.test(basename(repo)) && isDirectory(join(repo, 'blobs'))) {
      return { repo, revision: basename(current), snapshotDir: current };
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
  const found = findSnapshotAbove(dir);
  if (found !== undefined) return found;
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return undefined;
  }
  return real === dir ? undefined : findSnapshotAbove(real);
}

interface BlobFile {
  name: string;
  size: bigint;
  mtimeNs: bigint;
}

/** The regular files of `repo`/blobs by inode number (at most MAX_HUB_BLOBS_SCANNED lstat'ed). */
function scanBlobs(repo: string): Map<bigint, BlobFile[]> {
  const byInode = new Map<bigint, BlobFile[]>();
  const dir = join(repo, 'blobs');
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return byInode;
  }
  for (const name of names.slice(0, MAX_HUB_BLOBS_SCANNED)) {
    try {
      const info = lstatSync(join(dir, name), { bigint: true });
      if (!info.isFile()) continue;
      byInode.set(info.ino, [...(byInode.get(info.ino) ?? []), { name, size: info.size, mtimeNs: info.mtimeNs }]);
    } catch {
      // Removed since the listing: gone.
    }
  }
  return byInode;
}

/**
 * For one model's shards: a function that tells, of a binding's recorded stamps, the other
 * revision's file (still in the repository's blobs/) one of them names by inode, size and mtime
 * (a new blob that reused a deleted one's inode number has another mtime), with the snapshots that
 * link it; undefined where none does. Undefined itself where the model is not in a hub snapshot:
 * plain directories are judged as before. blobs/ is scanned once, at the first question.
 */
export function createOtherRevisionFinder(shards: readonly { name: string; path: string }[]): ((shardName: string, recorded: readonly string[]) => OtherRevisionFile | undefined) | undefined {
  const first = shards[0];
  const hub = first === undefined ? undefined : findHubSnapshot(first.path);
  if (hub === undefined) return undefined;
  const paths = new Map(shards.map((shard) => [shard.name, shard.path]));
  let blobs: Map<bigint, BlobFile[]> | undefined;
  const linked = new Map<string, OtherRevisionFile>();
  return (shardName, recorded) => {
    blobs ??= scanBlobs(hub.repo);
    for (const stamp of recorded) {
      const fields = parseFileStamp(stamp);
      if (fields?.inode === undefined) continue;
      const blob = blobs.get(BigInt(fields.inode))?.find((file) => file.size === BigInt(fields.size) && file.mtimeNs === BigInt(fields.mtimeNs));
      if (blob === undefined) continue;
      const id = `${shardName}\n${blob.name}`;
      let found = linked.get(id);
      if (found === undefined) {
        const path = paths.get(shardName);
        found = { blob: blob.name, ...(path === undefined ? { snapshots: [] } : findSnapshotsLinking(hub, path, BigInt(fields.inode))) };
        linked.set(id, found);
      }
      return found;
    }
    return undefined;
  };
}

/** The snapshots whose file at `shardPath`'s place in its snapshot is the blob of inode `inode`. */
function findSnapshotsLinking(hub: HubSnapshot, shardPath: string, inode: bigint): { snapshots: string[]; snapshotsCut?: true } {
  const inSnapshot = relative(hub.snapshotDir, shardPath);
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

/** `snapshots/aaaa and snapshots/bbbb` (or that no snapshot links it now), for the texts. */
export function describeLinkingSnapshots(found: Pick<OtherRevisionFile, 'snapshots' | 'snapshotsCut'>): string {
  if (found.snapshots.length === 0) return 'no snapshot links it now (an unreferenced blob: huggingface-cli delete-cache removes such revisions)';
  const names = found.snapshots.map((revision) => `snapshots/${revision}`);
  const list = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]!}`;
  return `${list}${found.snapshotsCut ? ' (and maybe others: not every snapshot was looked at)' : ''} still ${names.length === 1 ? 'links' : 'link'} it`;
}
