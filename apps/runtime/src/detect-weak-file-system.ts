import { readFileSync, realpathSync, statfsSync } from 'node:fs';
import type { SafetensorsModel } from '@splitzip/safetensors';

/**
 * File systems (statfs f_type) whose file metadata cannot tell two files apart: a read-only image's
 * inode numbers come from its layout and its times are the image's (squashfs gives ctime = mtime),
 * so the same file of two images of one layout (a base model and its fine-tune, each packed as an
 * Apptainer/SIF or snap image, with times pinned as reproducible builds do) has one stamp, and an
 * image mounted where another was may even get its loop device. FUSE passes on whatever its
 * server says. Stamps there prove nothing: a cache binding is checked against the bytes every time.
 */
const WEAK_FILE_SYSTEM_TYPES: ReadonlyMap<number, string> = new Map([
  [0x73717368, 'squashfs'],
  [0xe0f5e1e2, 'erofs'],
  [0x9660, 'iso9660'],
  [0x15013346, 'udf'],
  [0x28cd3d45, 'cramfs'],
  [0x65735546, 'fuse'],
]);

/** overlayfs (statfs f_type): weak when one of its lower layers is (an image below a writable layer, as Apptainer's `--overlay`). */
const OVERLAYFS_TYPE = 0x794c7630;

/** Where the kernel lists this process's mounts, with each overlay's lower directories. */
export const MOUNTINFO_PATH = '/proc/self/mountinfo';

/** The name of a file system type (statfs f_type) whose stamps prove nothing, or undefined. */
export function weakFileSystemName(type: number): string | undefined {
  return WEAK_FILE_SYSTEM_TYPES.get(type);
}

/** Per open model: shard name → the weak file system's name it lives on, or null. */
const weakShards = new WeakMap<SafetensorsModel, Map<string, string | null>>();

/**
 * The weak file system (WEAK_FILE_SYSTEM_TYPES) a model's shard file lives on, or undefined: one
 * statfs of its path per model and shard. A shard whose path cannot be statfs'd any more (a link
 * switched or removed, a lazy unmount: the model still reads what it opened) is taken as weak: a
 * trusted binding never reads the shard, so nothing else would notice. A model opened from a
 * ByteSource has object stamps, never asked about here.
 */
export function weakFileSystemOf(model: SafetensorsModel, shardName: string): string | undefined {
  let known = weakShards.get(model);
  if (known === undefined) weakShards.set(model, (known = new Map()));
  let name = known.get(shardName);
  if (name === undefined) {
    const path = model.shards.find((shard) => shard.name === shardName)?.path;
    name = null;
    if (path !== undefined) {
      try {
        const type = Number(statfsSync(path).type);
        name = weakFileSystemName(type) ?? (type === OVERLAYFS_TYPE ? weakLowerLayerOf(path) : undefined) ?? null;
      } catch {
        name = 'a file system that cannot be asked (statfs failed)';
      }
    }
    known.set(shardName, name);
  }
  return name ?? undefined;
}

export function isOnWeakFileSystem(model: SafetensorsModel, shardName: string): boolean {
  return weakFileSystemOf(model, shardName) !== undefined;
}

/** A mountinfo field: the kernel writes space, tab, newline and backslash as octal escapes (`\040`). */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * `<weak type> below an overlay` when the overlay mount holding `path` (the longest mount point
 * of an overlay mount above its real path, in MOUNTINFO_PATH) has a lower directory on a weak file
 * system; else undefined: no mountinfo, no such mount, or lower directories this process cannot
 * see (a container's overlay names the host's paths: its layers are ordinary files there).
 */
function weakLowerLayerOf(path: string): string | undefined {
  let real: string;
  let mounts: string;
  try {
    real = realpathSync(path);
    mounts = readFileSync(MOUNTINFO_PATH, 'utf8');
  } catch {
    return undefined;
  }
  let best: { point: string; options: string } | undefined;
  for (const line of mounts.split('\n')) {
    // `<id> <parent> <major:minor> <root> <mount point> <options> [optional…] - <type> <source> <super options>`
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const [type, , options = ''] = line.slice(dash + 3).split(' ');
    if (type !== 'overlay') continue;
    const point = unescapeMountField(line.slice(0, dash).split(' ')[4] ?? '');
    const inside = point === '/' || real === point || real.startsWith(`${point}/`);
    if (inside && (best === undefined || point.length > best.point.length)) best = { point, options };
  }
  if (best === undefined) return undefined;
  // `lowerdir=a:b`, or one `lowerdir+=a` per layer (mount API). The kernel writes a comma in a
  // value as an octal escape; overlay writes a colon in a name as `\:`.
  for (const match of best.options.matchAll(/(?:^|,)lowerdir\+?=([^,]*)/g)) {
    for (const dir of unescapeMountField(match[1]!).split(/(?<!\\):/)) {
      try {
        const name = weakFileSystemName(Number(statfsSync(dir.replace(/\\(.)/g, '$1')).type));
        if (name !== undefined) return `${name} below an overlay`;
      } catch {
        // Not visible from here: a container's layers, on the host.
      }
    }
  }
  return undefined;
}
