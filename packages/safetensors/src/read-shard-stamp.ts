import { getModelReader } from './model-reader.js';
import type { SafetensorsModel } from './types.js';

/**
 * A shard's stamp now (`<size>:<mtime ns>:<ctime ns>:<inode>` of the descriptor the model reads it through, one fstat),
 * to compare with `SafetensorsShard.stamp`, the stamp when the model was opened, by
 * isSameFileContentStamp: they differ once the file was rewritten in place under the open model
 * (reads of it then throw SHARD_CHANGED). Compared whole they differ after a chmod or an unlink too. Lets a
 * caller that serves a tensor without reading the shard (from a cache) notice the same change.
 * null for a model read from a ByteSource, for a shard name the model does not have, and after close().
 */
export function readShardStamp(model: SafetensorsModel, shardName: string): string | null {
  return getModelReader(model).stampNow(shardName);
}

/**
 * A path that names the shard file the model holds open, whatever its path names now (a switched
 * link, a rename, a lazy unmount): `/proc/self/fd/<fd>` on Linux, which statfs and realpath follow
 * to the open file; the shard's path elsewhere. For asking the file system about the bytes the
 * model reads (its type, its mount). null for a model read from a ByteSource, for a shard name the
 * model does not have, and after close().
 */
export function readShardDescriptorPath(model: SafetensorsModel, shardName: string): string | null {
  return getModelReader(model).descriptorPath(shardName);
}

/**
 * Whether the shard file the model holds open still has the prefix and header the model parsed,
 * so every tensor offset it knows still holds: false once its size or mtime moved (as
 * isSameFileContentStamp judges readShardStamp), or once its ctime moved and the header reads
 * otherwise now (a rewrite that restored the mtime: `cp -p` or `rsync --inplace -t` over the file,
 * `touch -r`). Reads the header again only when the ctime moved since it was last found the same.
 * The model's own reads apply the same rule (SHARD_CHANGED). true for a model read from a
 * ByteSource, for a shard name the model does not have, and after close().
 */
export function isShardHeaderUnchanged(model: SafetensorsModel, shardName: string): boolean {
  return getModelReader(model).headerUnchanged(shardName);
}
