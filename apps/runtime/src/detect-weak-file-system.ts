import { readFileSync, readlinkSync, realpathSync, statfsSync } from 'node:fs';
import { readShardDescriptorPath, type SafetensorsModel } from '@splitzip/safetensors';

/**
 * File systems (statfs f_type) whose file metadata cannot tell two files apart: a read-only image's
 * inode numbers come from its layout and its times are the image's (squashfs gives ctime = mtime),
 * so the same file of two images of one layout (a base model and its fine-tune, each packed as an
 * Apptainer/SIF or snap image, with times pinned as reproducible builds do) has one stamp, and an
 * image mounted where another was may even get its loop device. FUSE passes on whatever its
 * server says (virtiofs included: its shares are checked at every load too). Stamps there prove
 * nothing: a cache binding is checked against the bytes every time.
 */
const WEAK_FILE_SYSTEM_TYPES: ReadonlyMap<number, string> = new Map([
  [0x73717368, 'squashfs'],
  [0xe0f5e1e2, 'erofs'],
  [0x9660, 'iso9660'],
  [0x15013346, 'udf'],
  [0x28cd3d45, 'cramfs'],
  [0x65735546, 'fuse'],
]);

/** overlayfs (statfs f_type): weak when one of its lower layers is (an image below a writable layer). */
const OVERLAYFS_TYPE = 0x794c7630;

/** Overlays below overlays followed at most this deep (each level is one more mount to look up). */
const MAX_OVERLAY_DEPTH = 4;

/** Where the kernel lists this process's mounts, with each overlay's lower directories. */
export const MOUNTINFO_PATH = '/proc/self/mountinfo';

/** The name of a file system type (statfs f_type) whose stamps prove nothing, or undefined. */
export function weakFileSystemName(type: number): string | undefined {
  return WEAK_FILE_SYSTEM_TYPES.get(type);
}

/** Per open model: shard name → the weak file system's name it lives on, or null; and the mount table read for it. */
const weakShards = new WeakMap<SafetensorsModel, { shards: Map<string, string | null>; mounts?: string | null }>();

/**
 * The weak file system (WEAK_FILE_SYSTEM_TYPES, or an overlay over one) a model's shard file lives
 * on, or undefined: one statfs per model and shard, of the file the model holds open
 * (readShardDescriptorPath: a link switched or a path unmounted since the model opened it does not
 * matter), else (no /proc) of its path. A shard that cannot be statfs'd either way is taken as weak:
 * a trusted binding never reads the shard, so nothing else would notice.
 */
export function weakFileSystemOf(model: SafetensorsModel, shardName: string): string | undefined {
  let known = weakShards.get(model);
  if (known === undefined) weakShards.set(model, (known = { shards: new Map() }));
  let name = known.shards.get(shardName);
  if (name === undefined) {
    let held: string | null = null;
    try {
      held = readShardDescriptorPath(model, shardName);
    } catch {
      // Not a model openSafetensorsModel made (a wrapper): its path only.
    }
    const path = model.shards.find((shard) => shard.name === shardName)?.path;
    name = null;
    // The open file first; its path where the descriptor cannot be asked (no /proc mounted).
    const candidates = [held, path].filter((p): p is string => typeof p === 'string');
    if (candidates.length > 0) {
      name = 'a file system that cannot be asked (statfs failed)';
      for (const candidate of candidates) {
        let type: number;
        try {
          type = Number(statfsSync(candidate).type);
        } catch {
          continue;
        }
        name = weakFileSystemName(type) ?? (type === OVERLAYFS_TYPE ? weakLowerLayerOf(candidate, known, 1) : undefined) ?? null;
        break;
      }
    }
    known.shards.set(shardName, name);
  }
  return name ?? undefined;
}

/** A mountinfo field: the kernel writes space, tab, newline and backslash as octal escapes (`\040`). */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * `<weak type> below an overlay` when the overlay mount holding `path` (the overlay whose mount point
 * is the longest above its real path, the last listed where several share it: it is on top) has a
 * lower directory on a weak file system, or on an overlay that has (MAX_OVERLAY_DEPTH); else
 * undefined. Lower directories this process cannot reach by their absolute paths are not weak: a
 * container's overlay names the host's paths (its layers are ordinary files there), and so does an
 * image runtime's after it pivots into the overlay (then its image is not seen: README).
 */
function weakLowerLayerOf(path: string, known: { mounts?: string | null }, depth: number): string | undefined {
  if (known.mounts === undefined) {
    try {
      known.mounts = readFileSync(MOUNTINFO_PATH, 'utf8');
    } catch {
      known.mounts = null;
    }
  }
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    // A descriptor's file that was unlinked: its link names the path it had (with " (deleted)").
    try {
      real = readlinkSync(path).replace(/ \(deleted\)$/, '');
    } catch {
      return undefined;
    }
  }
  if (known.mounts === null) return undefined;
  let best: { point: string; options: string } | undefined;
  for (const line of known.mounts.split('\n')) {
    // `<id> <parent> <major:minor> <root> <mount point> <options> [optional…] - <type> <source> <super options>`
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const [type, , options = ''] = line.slice(dash + 3).split(' ');
    if (type !== 'overlay') continue;
    const point = unescapeMountField(line.slice(0, dash).split(' ')[4] ?? '');
    const inside = point === '/' || real === point || real.startsWith(`${point}/`);
    if (inside && (best === undefined || point.length >= best.point.length)) best = { point, options };
  }
  if (best === undefined) return undefined;
  // `lowerdir=a:b`, or one `lowerdir+=a` per layer (mount API). The kernel writes a comma in a
  // value as an octal escape; overlay writes a colon in a name as `\:`.
  for (const match of best.options.matchAll(/(?:^|,)lowerdir\+?=([^,]*)/g)) {
    for (const escaped of unescapeMountField(match[1]!).split(/(?<!\\):/)) {
      const dir = escaped.replace(/\\(.)/g, '$1');
      // A relative lower directory was named from the mounter's working directory, not ours.
      if (!dir.startsWith('/')) continue;
      try {
        const type = Number(statfsSync(dir).type);
        const name = weakFileSystemName(type);
        if (name !== undefined) return `${name} below an overlay`;
        if (type === OVERLAYFS_TYPE && depth < MAX_OVERLAY_DEPTH) {
          const below = weakLowerLayerOf(dir, known, depth + 1);
          if (below !== undefined) return below;
        }
      } catch {
        // Not reachable from here: a container's layers, on the host.
      }
    }
  }
  return undefined;
}
