import { openCacheStore, type GcReport } from '@splitzip/store';
import { defineCommand } from '../define-command.js';
import { formatBytes } from '../format-units.js';

export const gcCommand = defineCommand({
  name: 'gc',
  description: 'Remove orphan blobs, leftover temp files, stale locks and old journals from a cache',
  args: {
    cache: { type: 'positional', description: 'The cache directory', valueHint: 'cache-dir', required: true },
    dryRun: { type: 'boolean', description: 'Only report what would be removed' },
    json: { type: 'boolean', description: 'Print the report as JSON on stdout' },
  },
  async run({ args, io }) {
    const store = await openCacheStore(args.cache, { create: false });
    let report: GcReport;
    try {
      report = await store.gc({ dryRun: args.dryRun });
    } finally {
      await store.close();
    }
    if (args.json) {
      io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 0;
    }
    const verb = report.dryRun ? 'would remove' : 'removed';
    const lines = [
      `${verb} ${report.orphanBlobs.length} orphan blobs (${formatBytes(report.orphanBytes)}), ${report.tempFiles.length} temp files, ` +
        `${report.oldJournals.length} old journals, ${report.staleLocks.length} stale locks`,
      ...[...report.orphanBlobs, ...report.tempFiles, ...report.oldJournals, ...report.staleLocks].map((path) => `  ${path}`),
    ];
    if (report.unknownFiles.length > 0) lines.push(`left ${report.unknownFiles.length} files the cache did not write:`, ...report.unknownFiles.map((p) => `  ${p}`));
    io.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  },
});
