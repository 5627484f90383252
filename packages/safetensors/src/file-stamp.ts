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

/** A file stamp's fields, as decimal strings (ns values exceed a JS number's exact range). */
export interface FileStampFields {
  size: string;
  mtimeNs: string;
  /** Absent from a legacy stamp (`<size>:<mtime ns>`, before 2026-12-05), as `inode` is. */
  ctimeNs?: string;
  inode?: string;
}

/** A file stamp's fields (formatFileStamp's, or a legacy `<size>:<mtime ns>`); undefined for any other stamp. */
export function parseFileStamp(stamp: string): FileStampFields | undefined {
  const match = /^(\d+):(\d+)(?::(\d+):(\d+))?$/.exec(stamp);
  if (!match) return undefined;
  return { size: match[1]!, mtimeNs: match[2]!, ...(match[3] === undefined ? {} : { ctimeNs: match[3], inode: match[4]! }) };
}

/**
 * Whether a binding's recorded stamps are all of other files than `current` (the shard of that
 * name as it is now): file stamps with an inode number, none of them `current`'s. The same inode is
 * the same file, rewritten in place; another inode is another file, at another path (another
 * model's of this shard name) or at this one (replaced by a new file: a download, a save by
 * rename), which no stamp tells apart (they record no path). Inode numbers of two file systems may
 * coincide: such a file counts as this one. False where it cannot say (no stamps, stamps of the old
 * form or an object's, a shard with no file stamp). One rule for the builder (build, verify) and
 * the runtime (its stale remedy).
 */
export function isFromOtherFile(recorded: readonly string[], current: string | null): boolean {
  const inode = current === null ? undefined : parseFileStamp(current)?.inode;
  if (inode === undefined) return false;
  const inodes = recorded.map((stamp) => parseFileStamp(stamp)?.inode);
  return inodes.length > 0 && inodes.every((other) => other !== undefined && other !== inode);
}

/**
 * Whether two stamps of ONE open file (its descriptor's) say its bytes are unchanged: size and mtime
 * equal. Its ctime is left out: a chmod, chown, xattr (a backup tool, an SELinux relabel) or an
 * unlink moves it under an open model without touching a byte, and must not fail the model's reads
 * (a reader that serves cached bytes judges them by the stamp now, ctime included: a rewrite that
 * restores the mtime moves the ctime). Stamps that are not file stamps: equal strings.
 */
export function isSameFileContentStamp(a: string, b: string): boolean {
  const [x, y] = [parseFileStamp(a), parseFileStamp(b)];
  if (x === undefined || y === undefined) return a === b;
  return x.size === y.size && x.mtimeNs === y.mtimeNs;
}

/**
 * Whether two file stamps name the same file with the same size and mtime, its ctime left out (a
 * chmod): for a reader that opens a shard by path while the model holds it open (the open
 * descriptor keeps its inode number from being reused, so another file there has another one).
 * Stamps that are not file stamps: equal strings.
 */
export function isSameFileIgnoringCtime(a: string, b: string): boolean {
  const [x, y] = [parseFileStamp(a), parseFileStamp(b)];
  if (x === undefined || y === undefined) return a === b;
  return x.size === y.size && x.mtimeNs === y.mtimeNs && x.inode === y.inode;
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
