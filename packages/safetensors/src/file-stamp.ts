import { statSync, type BigIntStats } from 'node:fs';

/**
 * THE shard stamp rule (SafetensorsShard.stamp): `<size>:<mtime ns>:<ctime ns>:<inode>`. Size and
 * mtime are what make and rsync compare, and alone they do not tell apart two files of one size
 * and mtime: copies made with `rsync -t`, `touch -r` or tar, file systems and images that pin times
 * (the Nix store, reproducible builds). A cache trusts a binding for the stamps it recorded, so two
 * such files must not share one: two files that exist at once on one file system have other inode
 * numbers, and a file written where another was deleted (which may get its inode number again) has
 * another ctime (the inode's change time, which no tool can set). The device is left out: it may
 * change at a remount, and hosts sharing files over NFS see one inode number but other devices.
 * Inode and ctime move when a file is copied or replaced by a rename (and the ctime on chmod, chown,
 * links and xattrs): a cache then checks the file's bytes once more, a cost, never wrong data.
 * Stamps before 2026-12-05 were `<size>:<mtime ns>`.
 */
export function formatFileStamp(stats: Pick<BigIntStats, 'size' | 'mtimeNs' | 'ctimeNs' | 'ino'>): string {
  return `${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}:${stats.ino}`;
}

/** A file stamp's size and mtime (`<size>:<mtime ns>`); other stamps as they are. */
function contentPart(stamp: string): string {
  const second = stamp.indexOf(':', stamp.indexOf(':') + 1);
  return second < 0 ? stamp : stamp.slice(0, second);
}

/**
 * Whether two stamps of ONE open file (its descriptor's) say its bytes are unchanged: size and mtime
 * equal. Its ctime is left out: a chmod, chown, xattr (a backup tool, an SELinux relabel) or an
 * unlink moves it under an open model without touching a byte, and must not fail the model's reads.
 */
export function isSameFileContentStamp(a: string, b: string): boolean {
  return contentPart(a) === contentPart(b);
}

/**
 * The stamp of the file now at `path` (one stat, links followed), or null when it cannot be
 * stat'ed: for a reader that opens shards by path, to tell whether that file is the one a model
 * opened (SafetensorsShard.stamp).
 */
export function readFileStamp(path: string): string | null {
  try {
    return formatFileStamp(statSync(path, { bigint: true }));
  } catch {
    return null;
  }
}
