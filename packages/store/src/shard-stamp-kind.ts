import { OBJECT_STAMP_PREFIX } from '@splitzip/safetensors';

/**
 * Object stamps name an S3 object's version (`etag:<ETag>`, quotes as S3 gives them); every other
 * stamp is a local file's (`<size>:<mtime ns>:<ctime ns>:<inode>`, SafetensorsShard.stamp). A file stamp describes one
 * host's file; an object stamp describes bytes any host reads, so an S3 cache keeps only those in
 * its bucket (file stamps stay on the host: host-file-stamps.ts).
 */
export { OBJECT_STAMP_PREFIX };

export type ShardStampKind = 'file' | 'object';

/** 'object' iff the stamp starts with OBJECT_STAMP_PREFIX. */
export function shardStampKind(stamp: string): ShardStampKind {
  return stamp.startsWith(OBJECT_STAMP_PREFIX) ? 'object' : 'file';
}
