import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { isS3Url, isStoreError } from '@splitzip/store';
import { checkCacheLocation } from '../check-cache-location.js';
import { checkLocalModel } from '../check-local-model.js';
import { UsageError } from '../errors.js';
import { defineCommand } from '../define-command.js';
import { openExistingCache } from '../open-existing-cache.js';
import { formatBytes, formatPercent, formatTable } from '../format-units.js';
import { inspectCache, type InspectReport } from '../inspect-cache.js';
import { judgeModelBindings } from '../judge-model-bindings.js';
import { renderModelBindings } from '../render-model-bindings.js';
import { throwIfInterrupted } from '../throw-if-interrupted.js';

export const inspectCommand = defineCommand({
  name: 'inspect',
  description: 'Show what a cache holds: totals, ratio, escape rates, entries and their slices',
  notes: [
    "With --model: which bindings of the model's shard names are live, unchecked or left behind, and",
    'how many bindings other shard names have: what `gc --model` would remove (nothing is changed).',
  ],
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    model: { type: 'string', description: 'Judge the bindings against this model, as gc --model would (changes nothing)', valueHint: 'model' },
    pruneOtherShards: { type: 'boolean', description: "With --model: count the bindings of shard names the model does not have as gc --model --prune-other-shards would" },
    json: { type: 'boolean', description: 'Print { cache, entries: [...], totals: {...}, bindings? } as JSON on stdout' },
  },
  async run({ args, io, signal }) {
    checkCacheLocation(args.cache, 'inspect', '<cache-dir>');
    if (args.pruneOtherShards && args.model === undefined) throw new UsageError("option '--prune-other-shards' needs '--model <model>'", 'inspect');
    if (args.model !== undefined) checkLocalModel(args.model, 'inspect', '--model');
    const model: SafetensorsModel | undefined = args.model === undefined ? undefined : await openSafetensorsModel(args.model);
    let report: InspectReport;
    let dropRefusal: string | false | undefined;
    try {
      const store = await openExistingCache(args.cache, { signal, command: 'inspect' });
      try {
        // Ctrl-C once the cache is open: stop as every command does (it printed the whole report, exit 0).
        throwIfInterrupted(signal);
        report = inspectCache(store, args.cache);
        throwIfInterrupted(signal);
        if (model !== undefined) report.bindings = judgeModelBindings(store, model, args.model!, { pruneOtherShards: args.pruneOtherShards });
        throwIfInterrupted(signal);
        // The text names the command that removes unbound entries: not where it would refuse (a
        // damaged manifest's kept copy, whose unbound entries are other models' salvaged ones; a
        // damaged journal). Its dry run is a look: no lock, nothing changed.
        if (!args.json && report.totals.unboundEntries > 0 && !isS3Url(args.cache)) {
          // Only the drop's own refusals are named as such; any other failure of the look leaves
          // the line without advice (dropAdvice false).
          dropRefusal = await store.dropUnboundEntries({ dryRun: true }).then(
            () => undefined,
            (error: unknown) => (isStoreError(error, 'MANIFEST_INVALID') || isStoreError(error, 'JOURNAL_INVALID') ? error.code : false),
          );
        }
      } finally {
        await store.close();
      }
    } finally {
      await model?.close();
    }
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderInspectReport(report, dropRefusal));
    return 0;
  },
});

/**
 * The text report; `dropRefusal`: the code of the store's refusal of gc --drop-unbound-entries, if it
 * refuses now (false: the look failed otherwise, and the line gives no advice).
 */
export function renderInspectReport(report: InspectReport, dropRefusal?: string | false): string {
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
    // Only where there are some: found by content key only, they are what a drop reclaims.
    ...(t.unboundEntries === 0
      ? []
      : [
          `unbound ${t.unboundEntries} entr${t.unboundEntries === 1 ? 'y' : 'ies'} bound to no slice (${formatBytes(t.unboundCompBytes)}): found by content key only; ` +
            (isS3Url(report.cache)
              ? 'gc --drop-unbound-entries does not remove them on s3:// caches yet'
              : dropRefusal === false
                ? 'gc --drop-unbound-entries removes them'
                : dropRefusal !== undefined
                ? `splitzip gc ${report.cache} --drop-unbound-entries refuses to remove them for now (${dropRefusal}: it says why)`
                : `splitzip gc ${report.cache} --drop-unbound-entries removes them (build each model that uses the cache first: one whose shards were renamed binds its tensors among them again)`),
        ]),
    ...(report.bindings === undefined ? [] : renderModelBindings(report.bindings, report.cache, 'gc --model would remove')),
  ];
  return `${lines.join('\n')}\n`;
}
