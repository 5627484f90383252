import { DEFAULT_LOCK_TIMEOUT_MS, MIN_S3_GC_AGE_MS, isS3Url, type GcReport } from '@splitzip/store';
import { defineCommand } from '../define-command.js';
import { UsageError } from '../errors.js';
import { formatBytes } from '../format-units.js';
import { openExistingCache } from '../open-existing-cache.js';
import { parseDurationMs } from '../parse-duration.js';
import { describeLockWait, describeUnreadableLockWait, watchWriterLock } from '../watch-writer-lock.js';

export const gcCommand = defineCommand({
  name: 'gc',
  description: 'Remove orphan blobs, leftover temp files, stale locks and old journals from a cache',
  notes: [
    'On an s3:// cache: orphan blobs and unfinished multipart uploads older than --min-age (default',
    '1h, at least 35m: a writer may be between its blob and its entry that long) are removed; objects',
    'it did not write are kept.',
  ],
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    dryRun: { type: 'boolean', description: 'Only report what would be removed' },
    minAge: { type: 'string', description: 's3:// only: remove orphans older than this (35m at least; 1h, 2d)', valueHint: 'duration' },
    json: { type: 'boolean', description: 'Print the report as JSON on stdout' },
  },
  async run({ args, io, signal }) {
    const s3 = isS3Url(args.cache);
    let minAgeMs: number | undefined;
    if (args.minAge !== undefined) {
      // A directory cache judges leftovers by their writer's pid, not by age.
      if (!s3) throw new UsageError("option '--min-age' applies to s3:// caches only", 'gc');
      minAgeMs = parseDurationMs(args.minAge, '--min-age', 'gc');
      // The store refuses it too (INVALID_ARGUMENT); said here as the usage error it is, before any request.
      if (minAgeMs < MIN_S3_GC_AGE_MS) {
        throw new UsageError(
          `option '--min-age' must be at least ${MIN_S3_GC_AGE_MS / 60_000}m on an s3:// cache: a build may be between a blob's upload and its entry's for that long, and younger orphans may be its blobs (a shorter age deleted a running build's blobs)`,
          'gc',
        );
      }
    }
    const store = await openExistingCache(args.cache, { signal, command: 'gc' });
    // A real gc of a directory takes the writer lock: a writer that keeps it (a stopped build) is
    // named instead of 30 s of silence (a dry run takes no lock).
    const watch =
      s3 || args.dryRun
        ? undefined
        : watchWriterLock(args.cache, {
            onWait: (holder) => io.stderr.write(`splitzip gc: ${describeLockWait(args.cache, { ...holder, lockTimeoutMs: DEFAULT_LOCK_TIMEOUT_MS })}\n`),
            onUnreadable: () => io.stderr.write(`splitzip gc: ${describeUnreadableLockWait(args.cache)}\n`),
          });
    let report: GcReport;
    try {
      const gc = store.gc({ dryRun: args.dryRun, ...(minAgeMs !== undefined ? { minAgeMs } : {}) });
      report = await (watch?.during(gc) ?? gc);
    } finally {
      watch?.stop();
      await store.close();
    }
    if (args.json) {
      io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 0;
    }
    const verb = report.dryRun ? 'would remove' : 'removed';
    const lines = [
      s3
        ? `${verb} ${report.orphanBlobs.length} orphan blobs (${formatBytes(report.orphanBytes)}), ${report.tempFiles.length} unfinished uploads, ` +
          `${report.orphanStamps?.length ?? 0} stamp objects no reader takes`
        : `${verb} ${report.orphanBlobs.length} orphan blobs (${formatBytes(report.orphanBytes)}), ${report.tempFiles.length} temp files, ` +
          `${report.oldJournals.length} old journals, ${report.staleLocks.length} stale locks`,
      ...[...report.orphanBlobs, ...report.tempFiles, ...report.oldJournals, ...report.staleLocks, ...(report.orphanStamps ?? [])].map((path) => `  ${path}`),
    ];
    if (report.finishedCompaction !== undefined) {
      lines.push(`${report.dryRun ? 'would finish' : 'finished'} the interrupted fold of ${report.finishedCompaction} into manifest.json`);
    }
    if (report.unknownFiles.length > 0) lines.push(`left ${report.unknownFiles.length} ${s3 ? 'objects' : 'files'} the cache did not write:`, ...report.unknownFiles.map((p) => `  ${p}`));
    io.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  },
});
