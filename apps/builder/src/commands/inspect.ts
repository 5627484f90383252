import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import { isS3Url } from '@splitzip/store';
import { checkCacheLocation } from '../check-cache-location.js';
import { checkLocalModel } from '../check-local-model.js';
import { UsageError } from '../errors.js';
import { defineCommand } from '../define-command.js';
import { findDropRefusal } from '../find-drop-refusal.js';
import { cutToWidth, displayWidth } from '../display-width.js';
import { checkNotDanglingLink } from '../find-dangling-link.js';
import { openExistingCache } from '../open-existing-cache.js';
import { quoteForShell } from '../quote-for-shell.js';
import { fitReportLines, formatBytes, formatCountOf, formatPercent, formatTable, REPORT_LINE_COLUMNS } from '../format-units.js';
import { inspectCache, type InspectReport } from '../inspect-cache.js';
import { judgeModelBindings } from '../judge-model-bindings.js';
import { formatMinAge, parseS3MinAgeMs } from '../parse-min-age.js';
import { renderModelBindings } from '../render-model-bindings.js';
import { throwIfInterrupted } from '../throw-if-interrupted.js';
import { showName } from '../show-name.js';

export const inspectCommand = defineCommand({
  name: 'inspect',
  description: 'Show what a cache holds: totals, ratio, escape rates, entries and their slices',
  notes: [
    "With --model: which bindings of the model's shard names are live, unchecked or left behind, and",
    'how many bindings other shard names have: what `gc --model` would remove (nothing is changed).',
    'On an s3:// cache, --min-age (default 1h, at least 35m) is passed to the drop gc is asked for',
    'and named on the gc line it prints.',
  ],
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    model: { type: 'string', description: 'Judge the bindings against this model, as gc --model would (changes nothing)', valueHint: 'model' },
    minAge: { type: 'string', description: 's3:// only: judge the drop as gc --min-age would (default 1h, at least 35m)', valueHint: 'duration' },
    pruneOtherShards: { type: 'boolean', description: 'With --model: judge as gc --model --prune-other-shards would' },
    pruneOtherFiles: { type: 'boolean', description: 'With --model: judge as gc --model --prune-other-files would' },
    json: { type: 'boolean', description: 'Print { cache, entries, totals, bindings? } as JSON on stdout' },
  },
  async run({ args, io, signal }) {
    checkCacheLocation(args.cache, 'inspect', '<cache-dir>');
    if (args.pruneOtherShards && args.model === undefined) throw new UsageError("option '--prune-other-shards' needs '--model <model>'", 'inspect');
    if (args.pruneOtherFiles && args.model === undefined) throw new UsageError("option '--prune-other-files' needs '--model <model>'", 'inspect');
    if (args.model !== undefined) checkLocalModel(args.model, 'inspect', '--model');
    const minAgeMs = parseS3MinAgeMs(args.minAge, isS3Url(args.cache), 'inspect');
    const model: SafetensorsModel | undefined = args.model === undefined ? undefined : await openSafetensorsModel(args.model);
    // A link to a missing directory read as a directory with no manifest.json: "`splitzip build` makes one", which failed the same way.
    if (!isS3Url(args.cache)) await checkNotDanglingLink(args.cache, 'the cache');
    let report: InspectReport;
    try {
      const store = await openExistingCache(args.cache, { signal, command: 'inspect' });
      try {
        // Ctrl-C once the cache is open: stop as every command does (it printed the whole report, exit 0).
        throwIfInterrupted(signal);
        report = inspectCache(store, args.cache);
        throwIfInterrupted(signal);
        if (model !== undefined) report.bindings = judgeModelBindings(store, model, args.model!, { pruneOtherShards: args.pruneOtherShards, pruneOtherFiles: args.pruneOtherFiles });
        throwIfInterrupted(signal);
        // Whether gc --drop-unbound-entries would refuse now (a damaged manifest's kept copy, whose
        // unbound entries are other models' salvaged ones; a damaged journal; a store that cannot
        // drop): the store's dry run answers, a look with no lock that changes nothing. The text
        // names the command only where it would run.
        report.totals.dropRefusal = await findDropRefusal(store, { minAgeMs });
        // No drop needs --exclusive since 2026-12-07 (s3://: its intent objects); false, kept for scripts.
        report.totals.dropNeedsExclusive = false;
      } finally {
        await store.close();
      }
    } finally {
      await model?.close();
    }
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderInspectReport(report, { minAgeMs }));
    return 0;
  },
});

/**
 * The most columns the unbound line takes where it quotes the store's refusal, before it wraps to
 * report lines (REPORT_LINE_COLUMNS each, two or three): that message (about 450 characters, more
 * where it names many files) made a ~600-character line; it is whole in --json
 * (`totals.dropRefusal.message`).
 */
const MAX_REFUSAL_LINE_COLUMNS = 2 * REPORT_LINE_COLUMNS;
/** Where a cut refusal is whole. */
const REFUSAL_WHOLE_AT = ' (inspect --json)';

/**
 * `head` and the refusal's message (its "dropUnboundEntries refuses" lead-in dropped: the line says
 * that), cut at a word to MAX_REFUSAL_LINE_COLUMNS; its code kept, whatever `head`'s length.
 */
function fitRefusal(head: string, message: string): string {
  const reason = message.replace(/^([A-Z][A-Z0-9_]*: )dropUnboundEntries refuses:? /, '$1');
  const line = `${head}${reason}`;
  if (displayWidth(line) <= MAX_REFUSAL_LINE_COLUMNS) return line;
  const code = /^[A-Z][A-Z0-9_]*(?=: )/.exec(reason)?.[0] ?? '';
  const room = Math.max(MAX_REFUSAL_LINE_COLUMNS - displayWidth(head) - displayWidth(REFUSAL_WHOLE_AT), code.length + 2);
  const cut = cutToWidth(reason, room);
  // At a word where one ends in the second half (cutToWidth already ends it in "…").
  const space = cut.lastIndexOf(' ');
  const text = space > room / 2 ? `${cut.slice(0, space)} …` : cut;
  return `${head}${text}${REFUSAL_WHOLE_AT}`;
}

/** Where the entries table stacks its rows (a long tensor name on a line of its own): a terminal's width, about. */
const TABLE_MAX_COLUMNS = 120;

/** The text report; its unbound line names gc --drop-unbound-entries, or the store's refusal of it (`totals.dropRefusal`). */
export function renderInspectReport(report: InspectReport, options: { minAgeMs?: number | undefined } = {}): string {
  const rows = report.entries.map((e) => [
    showName(e.qualname),
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
  // The gc command line the line names: the one that gives the refusal or runs (s3://: with inspect's --min-age).
  const minAge = options.minAgeMs === undefined ? '' : ` --min-age ${formatMinAge(options.minAgeMs)}`;
  const lines = [
    formatTable(['tensor', 'key', 'shape', 'raw', 'comp', 'ratio', 'escapes', 'codes', 'slices'], rows, [false, false, false, true, true, true, true, true, false], { maxLineColumns: TABLE_MAX_COLUMNS }),
    '',
    `cache   ${report.cache}`,
    // A binding per file (FILE-BINDINGS.md): said only where some slice holds several.
    `entries ${t.entries} (${t.slices} slice keys${(t.slicesWithSeveralBindings ?? 0) > 0 ? `; ${formatCountOf(t.slicesWithSeveralBindings!, 'slice')} bound for several files, one binding each` : ''})`,
    `size    ${formatBytes(t.rawBytes)} raw -> ${formatBytes(t.compBytes)} compressed` + (t.ratio === null ? '' : `, ratio ${t.ratio.toFixed(4)}`),
    `escapes ${t.escapeCount} of ${t.elementCount} values (${formatPercent(t.escapeRate, 4)})`,
    // Only where there are some: found by content key only, they are what a drop reclaims.
    ...(t.unboundEntries === 0 ? [] : renderUnbound(report, minAge)),
    ...(report.bindings === undefined ? [] : renderModelBindings(report.bindings, report.cache, 'gc --model would remove')),
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The unbound line: the entries and what gc --drop-unbound-entries does with them (the command
 * line that runs, or gives the refusal: on s3:// with inspect's --min-age); a refusal is one line
 * of at most MAX_REFUSAL_LINE_COLUMNS. No --exclusive: no drop needs it since 2026-12-07.
 */
function renderUnbound(report: InspectReport, minAge: string): string[] {
  const t = report.totals;
  const head = `unbound ${formatCountOf(t.unboundEntries, 'entry', 'entries')} bound to no slice (${formatBytes(t.unboundCompBytes)}): found by content key only; `;
  const shared = describeSharedShardUnbound(t.sharedShardUnbound);
  if (t.dropRefusal === undefined) return fitReportLines([`${head}gc --drop-unbound-entries removes them`, ...shared]);
  if (t.dropRefusal !== null) {
    // Shorter than the others: the reason needs the room.
    const counted = `unbound ${formatCountOf(t.unboundEntries, 'entry', 'entries')} (${formatBytes(t.unboundCompBytes)})`;
    return fitReportLines([fitRefusal(`${counted}: gc --drop-unbound-entries${minAge} refuses now: `, t.dropRefusal.message)]);
  }
  // The command, its conditions indented below it (one line of ~300 columns before).
  const buildFirst = '  build each model that uses the cache first: one whose shards were renamed binds its tensors among them again';
  // The command on a line of its own, never wrapped (a line break in it, even outside its quoted
  // path, makes a paste run something else): only a long cache path takes it past 120 columns.
  return [...fitReportLines([`${head}removed by`]), `  splitzip gc ${quoteForShell(report.cache)} --drop-unbound-entries${minAge}`, ...fitReportLines([buildFirst, ...shared])];
}

/** Shard names a line names at most; the rest are counted (all in `totals.sharedShardUnbound.shardNames`). */
const MAX_SHARED_NAMES_SAID = 3;

/**
 * The unbound line's caution for the unbound entries whose name and shape match a tensor bound at a
 * shard name whose bindings were recorded with more than one file (`totals.sharedShardUnbound`):
 * another revision's tensors whose slices a --rebind moved are unbound yet that revision's, and
 * "build each model first" does not bind them (the last --rebind wins). Its loads read them raw (the
 * runtime's `stale`: the slice is bound to an entry of the tensor's own name), but its next build
 * --rebind finds them cached; following the plain advice deleted 4.14 MiB that build then encoded
 * again (user probe p3). The stamps cannot tell this model's own shard replaced by a new file (a save
 * by rename), whose old tensors nothing loads: said as the other case. Only those entries, counted:
 * it spoke of every unbound entry (review of 7c7f822).
 */
function describeSharedShardUnbound(shared: { entries: number; shardNames: string[] } | undefined): string[] {
  if (shared === undefined || shared.entries === 0) return [];
  const names = shared.shardNames;
  const said = names.slice(0, MAX_SHARED_NAMES_SAID).map(showName).join(', ') + (names.length > MAX_SHARED_NAMES_SAID ? ` and ${names.length - MAX_SHARED_NAMES_SAID} more` : '');
  const one = shared.entries === 1;
  return [
    `  but ${shared.entries} of them ${one ? 'matches' : 'match'} a tensor (name and shape) bound at shard ${names.length === 1 ? 'name' : 'names'} ${said}, ` +
      `whose bindings were recorded with more than one file: ${one ? 'it' : 'they'} may be another revision's or model's ${one ? 'tensor' : 'tensors'} ` +
      `whose ${one ? 'slice' : 'slices'} a --rebind moved (its loads read ${one ? 'it' : 'them'} raw, hashing each; its build --rebind binds ` +
      `${one ? 'it' : 'them'} again without encoding; dropped, that build encodes ${one ? 'it' : 'them'} again), or this model's own from before ` +
      'a save replaced its file with a new one, which nothing loads',
  ];
}
