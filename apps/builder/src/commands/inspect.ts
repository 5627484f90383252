import { defineCommand } from '../define-command.js';
import { openExistingCache } from '../open-existing-cache.js';
import { formatBytes, formatPercent, formatTable } from '../format-units.js';
import { inspectCache, type InspectReport } from '../inspect-cache.js';

export const inspectCommand = defineCommand({
  name: 'inspect',
  description: 'Show what a cache holds: totals, ratio, escape rates, entries and their slices',
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    json: { type: 'boolean', description: 'Print { entries: [...], totals: {...} } as JSON on stdout' },
  },
  async run({ args, io, signal }) {
    const store = await openExistingCache(args.cache, { signal, command: 'inspect' });
    let report: InspectReport;
    try {
      report = inspectCache(store, args.cache);
    } finally {
      await store.close();
    }
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderInspectReport(report));
    return 0;
  },
});

export function renderInspectReport(report: InspectReport): string {
  const rows = report.entries.map((e) => [
    e.qualname,
    e.key.slice(0, 12),
    `[${e.shape.join(',')}]`,
    formatBytes(e.rawBytes),
    formatBytes(e.compBytes),
    e.ratio === null ? '-' : e.ratio.toFixed(3),
    formatPercent(e.escapeRate, 3),
    String(e.codebookSize),
    e.slices.map(([shard, offset, size]) => `${shard}@${offset}+${size}`).join(' ') || '-',
  ]);
  const t = report.totals;
  const lines = [
    formatTable(['tensor', 'key', 'shape', 'raw', 'comp', 'ratio', 'escapes', 'codes', 'slices'], rows, [false, false, false, true, true, true, true, true, false]),
    '',
    `cache   ${report.cache}`,
    `entries ${t.entries} (${t.slices} slice keys)`,
    `size    ${formatBytes(t.rawBytes)} raw -> ${formatBytes(t.compBytes)} compressed` + (t.ratio === null ? '' : `, ratio ${t.ratio.toFixed(4)}`),
    `escapes ${t.escapeCount} of ${t.elementCount} values (${formatPercent(t.escapeRate, 4)})`,
  ];
  return `${lines.join('\n')}\n`;
}
