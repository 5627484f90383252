import { statfsSync } from 'node:fs';
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
        name = weakFileSystemName(Number(statfsSync(path).type)) ?? null;
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
