// --min-age of gc and inspect: s3:// only, a duration no shorter than the store's floor.
import { MIN_S3_GC_AGE_MS } from '@splitzip/store';
import { UsageError } from './errors.js';
import { parseDurationMs } from './parse-duration.js';

/**
 * --min-age in ms, or undefined where not given. A directory cache judges leftovers by their
 * writer's pid, not by age: the option there is a usage error. Below MIN_S3_GC_AGE_MS the store
 * refuses it too (INVALID_ARGUMENT); said here as the usage error it is, before any request.
 */
export function parseS3MinAgeMs(value: string | undefined, s3: boolean, command: string): number | undefined {
  if (value === undefined) return undefined;
  if (!s3) throw new UsageError("option '--min-age' applies to s3:// caches only", command);
  const minAgeMs = parseDurationMs(value, '--min-age', command);
  if (minAgeMs < MIN_S3_GC_AGE_MS) {
    throw new UsageError(
      `option '--min-age' must be at least ${MIN_S3_GC_AGE_MS / 60_000}m on an s3:// cache: a build may be between a blob's upload and its entry's for that long, and younger orphans may be its blobs (a shorter age deleted a running build's blobs)`,
      command,
    );
  }
  return minAgeMs;
}

/** --min-age as a user writes it: 1h, 40m, 2400s (gc's and inspect's lines name it so). */
export function formatMinAge(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${Math.round(ms / 1000)}s`;
}
