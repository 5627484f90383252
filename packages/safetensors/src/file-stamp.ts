import { statSync, type BigIntStats } from 'node:fs';

/** THE shard stamp rule (SafetensorsShard.stamp): `<size>:<mtime ns>`, what make and rsync compare. */
export function formatFileStamp(stats: Pick<BigIntStats, 'size' | 'mtimeNs'>): string {
  return `${stats.size}:${stats.mtimeNs}`;
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
