import { checkCacheLocation } from '../check-cache-location.js';
import { checkLocalModel } from '../check-local-model.js';
import { checkCacheDirNotFile } from '../ensure-cache-dir.js';
import { isS3Url, MAX_SLICE_BINDINGS } from '@splitzip/store';
import { DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { buildCache, DEFAULT_COVERAGE_MIN, defaultJobs, type BuildReport } from '../build-cache.js';
import { ENCODE_BACKENDS, type EncodeBackend } from '../encode-backends.js';
import { defineCommand } from '../define-command.js';
import { UsageError } from '../errors.js';
import { MAX_BUILD_JOBS } from '../limits.js';
import { formatBytes, formatCount, formatCountOf, formatCoveragePercent, formatPercent, formatRate, formatTable, REPORT_LINE_COLUMNS, wrapHanging } from '../format-units.js';
import { createProgressBar } from '../progress-bar.js';
import { INLINE_MAX_BUILD_BYTES } from '../plan-build-memory.js';
import { describeLockWait, describeUnreadableLockWait } from '../watch-writer-lock.js';
import { showName } from '../show-name.js';

const MIB = 1024 * 1024;

export const buildCommand = defineCommand({
  name: 'build',
  description: 'Encode every BF16 tensor of a safetensors model into a cache (directory or s3://)',
  notes: [
    'Tensors that are not BF16 or whose Top-16 exponent coverage is below the gate are skipped',
    '(served raw); with --skip-no-gain, those whose payload would not be smaller than their raw',
    'bytes too (under 1,409 values, 1,537-1,664 at the default chunk size, or for their escapes):',
    'a runtime cacheOnly load then finds them missing.',
    'Identical tensors are stored once. Re-running finishes what is missing, puts',
    "back cached tensors' blobs a stat finds missing (or of another size), and writes nothing",
    'else; an interrupted build leaves a valid cache. --repair also reads every blob.',
    '',
    'Examples:',
    '  splitzip build ./model --out ./cache',
    '  splitzip build model.safetensors.index.json --out ./cache --jobs 2 --json > report.json',
    '  splitzip build ./model --out s3://bucket/caches/llama   # AWS_* settings from the environment',
    '  splitzip build s3://bucket/models/llama/ --out s3://bucket/caches/llama',
  ],
  args: {
    model: { type: 'positional', description: 'A .safetensors file, a directory of shards, an index.json, or s3://bucket/prefix', valueHint: 'model', required: true },
    out: { type: 'string', description: 'Cache directory or s3://bucket/prefix, created if missing', valueHint: 'cache-dir', required: true },
    coverageMin: {
      type: 'number',
      description: `Top-16 coverage gate (default: the cache's; ${DEFAULT_COVERAGE_MIN} for a new one)`,
      valueHint: 'fraction',
      min: 0,
      max: 1,
    },
    chunkSize: {
      type: 'number',
      description: `Values per chunk, a power of two (default: the cache's; ${DEFAULT_CHUNK_SIZE} if new)`,
      valueHint: 'n',
      integer: true,
      min: MIN_CHUNK_SIZE,
      max: MAX_CHUNK_SIZE,
    },
    backend: { type: 'string', description: 'Encoder backend', choices: ENCODE_BACKENDS, default: 'auto' },
    jobs: { type: 'number', description: `Worker threads, at most (0: main thread; default: cores, here ${defaultJobs()})`, valueHint: 'n', integer: true, min: 0, max: MAX_BUILD_JOBS },
    inlineMaxMib: {
      type: 'number',
      description: `No workers for up to this much BF16 (0: workers always)`,
      valueHint: 'MiB',
      default: INLINE_MAX_BUILD_BYTES / MIB,
      min: 0,
      max: 2 ** 30,
    },
    rebind: { type: 'boolean', description: "Move this file's stale slice bindings (changed in place) to its tensors" },
    rebindOtherFiles: {
      type: 'boolean',
      description: "With --rebind: no effect since 0.56 (other files' bindings are kept)",
    },
    repair: {
      type: 'boolean',
      description: 'Also read every cached blob; put back missing or damaged ones',
    },
    skipNoGain: {
      type: 'boolean',
      description: 'Skip tensors whose payload would not shrink (cacheOnly loads then fail)',
    },
    json: { type: 'boolean', description: 'Print the report as JSON on stdout' },
    quiet: { type: 'boolean', description: 'No progress bar, no per-tensor table' },
  },
  async run({ args, io, signal, collectGarbage }) {
    checkLocalModel(args.model, 'build', '<model>', true);
    checkCacheLocation(args.out, 'build', '--out');
    // Before the model is read: a file given as --out is a usage error, said in the option's name.
    if (!isS3Url(args.out)) await checkCacheDirNotFile(args.out, "option '--out'");
    if (args.chunkSize !== undefined && (args.chunkSize & (args.chunkSize - 1)) !== 0) {
      throw new UsageError(`option '--chunk-size' must be a power of two, got ${args.chunkSize}`, 'build');
    }
    if (args.rebindOtherFiles === true && args.rebind !== true) {
      throw new UsageError("option '--rebind-other-files' needs --rebind (it has no effect since 0.56: other files' bindings are kept beside this model's)", 'build');
    }
    const progress = createProgressBar({ stream: io.stderr, enabled: Boolean(io.stderr.isTTY) && !args.quiet });
    let report: BuildReport;
    // Stopped by a signal at a safe point, the error carries the report of what it finished (with
    // `interrupted: true`): with --json the CLI prints it, with the error, as its one document.
    try {
      report = await buildCache({
        model: args.model,
        cacheDir: args.out,
        ...(args.coverageMin === undefined ? {} : { coverageMin: args.coverageMin }),
        ...(args.chunkSize === undefined ? {} : { chunkSize: args.chunkSize }),
        backend: args.backend as EncodeBackend,
        jobs: args.jobs ?? defaultJobs(),
        inlineMaxBytes: Math.round(args.inlineMaxMib * MIB),
        rebindSlices: args.rebind,
        ...(args.rebindOtherFiles === true ? { rebindOtherFiles: true } : {}),
        repair: args.repair,
        skipNoGain: args.skipNoGain ?? false,
        ...(collectGarbage ? { collectGarbage } : {}),
        signal,
        onProgress(event) {
          if (event.type === 'start') {
            // Said even with --quiet (which drops the bar and the table only): a backend asked for by
            // name that did not start changes what ran.
            if (event.fallbackReason) io.stderr.write(`splitzip build: warning: ${event.fallbackReason}; using ${event.backend}\n`);
            progress.update(0, event.totalBytes);
          } else if (event.type === 'lock-wait') {
            // Said even with --quiet, as the warning above: a build that waits 30 s in silence looks hung.
            progress.note(`splitzip build: ${describeLockWait(args.out, event)}`);
          } else if (event.type === 'lock-unreadable') {
            progress.note(`splitzip build: ${describeUnreadableLockWait(args.out)}`);
          } else if (event.type === 'manifest-recovery') {
            // Said even with --quiet: the cache was damaged, and a large one takes a while to check.
            if (event.done === 0) progress.note(`splitzip build: the cache's manifest is damaged (or an older copy): checking the ${event.total} entries it still lists against their blobs`);
            progress.update(event.doneBytes, event.totalBytes, `${event.done}/${event.total} salvaged entries checked`);
          } else {
            progress.update(event.doneBytes, event.totalBytes, `${event.doneTensors}/${event.tensorCount} ${event.tensor.name}`);
          }
        },
      });
    } finally {
      progress.finish();
    }
    // Not an error (a valid, empty model), but rarely what was meant: an index whose weight_map is empty.
    if (report.tensors.length === 0) io.stderr.write(`splitzip build: warning: the model ${args.model} has no tensors; nothing was cached\n`);
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderBuildReport(report, { tensors: !args.quiet }));
    return 0;
  },
});

/** The `dropped` line: this file's bindings the rule left out, and other files' it pushed out, each said apart. */
function describeDroppedBindings(report: BuildReport): string {
  const own = Math.min(report.tensors.filter((t) => t.bindingDropped === true).length, report.dropped_bindings);
  const others = report.dropped_bindings - own;
  const parts = [
    ...(own > 0
      ? [
          `${formatCount(own)} of this file (it changed less recently than the ${MAX_SLICE_BINDINGS} files bound: its loads hash ` +
            `${own === 1 ? 'that tensor and find it' : 'those tensors and find them'} by content key)`,
        ]
      : []),
    ...(others > 0 ? [`${formatCount(others)} of other files (their loads hash the tensors and find them by content key; a build of such a file binds them again)`] : []),
  ];
  return `dropped ${formatCountOf(report.dropped_bindings, 'slice binding')} (a slice keeps ${MAX_SLICE_BINDINGS}, one per file; the least recent went): ${parts.join('; ')}`;
}

export function renderBuildReport(report: BuildReport, options: { tensors: boolean }): string {
  const lines: string[] = [];
  const unboundUnaliased = report.tensors.filter((t) => t.unboundFrom !== undefined && t.unaliased === true).length;
  const unboundSkipped = report.tensors.filter((t) => t.unboundFrom !== undefined && t.unaliased !== true && t.status.startsWith('skipped')).length;
  // Bound for this file, its binding from before it changed in place beside: removed (plain build or --rebind).
  const unboundBeside = report.tensors.filter((t) => t.unboundFrom !== undefined && t.unaliased !== true && !t.status.startsWith('skipped')).length;
  if (options.tensors) {
    const rows = report.tensors.map((t) => [
      showName(t.name),
      t.dtype,
      `[${t.shape.join(',')}]`,
      formatBytes(t.sizeBytes),
      t.bindingDropped
        ? `${t.status}, unbound (binding dropped)`
        : t.unaliased
        ? `${t.status}, unbound${t.unboundFrom === undefined ? '' : ' (stale binding removed)'}`
        : t.unboundFrom !== undefined
          ? `${t.status} (stale binding removed)`
          : t.status,
      formatCoveragePercent(t.coverage),
      t.compBytes === null ? '-' : formatBytes(t.compBytes),
      t.compBytes === null || t.sizeBytes === 0 ? '-' : (t.compBytes / t.sizeBytes).toFixed(3),
    ]);
    // Within 120 columns: a row that would not fit has its name on a line of its own (as inspect's).
    lines.push(
      formatTable(['tensor', 'dtype', 'shape', 'raw', 'status', 'coverage', 'comp', 'ratio'], rows, [false, false, false, true, false, true, true, true], {
        maxLineColumns: REPORT_LINE_COLUMNS,
      }),
      '',
    );
  }
  const tensorCount = report.tensors.length;
  const summary = [

    `model   ${report.model}`,
    `cache   ${report.cache}`,
    `tensors ${formatCount(tensorCount)}: ${formatCount(report.encoded)} encoded, ${formatCount(report.cached)} already cached, ` +
      `${formatCount(report.skipped_coverage)} skipped (coverage < ${report.coverage_min}), ${formatCount(report.skipped_dtype)} skipped (not BF16)` +
      (report.skipped_size > 0 ? `, ${formatCount(report.skipped_size)} skipped (too large)` : '') +
      (report.skipped_no_gain > 0 ? `, ${formatCount(report.skipped_no_gain)} skipped (would not shrink)` : '') +
      // Their bytes are in the cache, but the runtime cannot find them by slice: it reads them raw.
      (report.unaliased > 0 ? `; ${formatCount(report.unaliased)} of them left unbound (served raw: MAX_SLICE_KEYS_PER_ENTRY identical tensors bound already)` : '') +
      // --rebind: their slices' bindings to the bytes the files held before are gone with them.
      (unboundUnaliased > 0 ? `, their ${formatCountOf(unboundUnaliased, 'stale binding')} to other bytes removed` : '') +
      // --rebind: a skipped tensor's slice bound to bytes the file held before: nothing binds it anew.
      (unboundSkipped > 0 ? `; ${formatCount(unboundSkipped)} skipped ${unboundSkipped === 1 ? "tensor's stale binding" : "tensors' stale bindings"} to other bytes removed` : '') +
      (unboundBeside > 0
        ? `; ${formatCountOf(unboundBeside, 'stale binding')} of this file (before it changed in place) to other bytes removed from beside ${unboundBeside === 1 ? 'its tensor' : 'its tensors'}`
        : ''),
    // Not an error (exit 0, the JSON as always), but an empty cache from a model of other dtypes read as a success.
    ...(tensorCount > 0 && report.tensors.every((t) => t.dtype !== 'BF16')
      ? [`note    SplitZip stores BF16 tensors only, and this model has none (${describeDtypes(report)}): nothing was cached, every tensor is served raw`]
      : []),
    `cached  ${formatBytes(report.raw_bytes)} raw -> ${formatBytes(report.comp_bytes)} compressed` + (report.ratio === null ? '' : `, ratio ${report.ratio.toFixed(4)} (${describeRatio(report.ratio)})`),
    `wrote   ${formatBytes(report.stored_bytes)} in ${formatCountOf(report.encoded, 'new entry', 'new entries')}, ${formatCountOf(report.aliased, 'slice binding')}` +
      (report.repaired > 0 ? `, ${describeRepaired(report)}` : ''),
    // Past MAX_SLICE_BINDINGS files of one slice, the least recent file's binding went: that file's
    // loads hash the tensor again (and find it by content key) until its next build.
    // This file's own new binding is among them where it changed less recently than the files bound.
    ...(report.dropped_bindings > 0 ? [describeDroppedBindings(report)] : []),
    // Said once, at the build that does it: older releases refuse the cache from now on.
    ...(report.cache_format_moved || report.cache_object_format_moved ? [describeFormatMove(report)] : []),
    ...(report.journal_recovered !== null
      ? [
          (report.journal_recovered.keptAs === null
            ? 'journal missing: the cache moved to a new generation from its manifest; '
            : `journal damaged from byte ${report.journal_recovered.damagedFromOffsetBytes}: kept as ${report.journal_recovered.keptAs}; `) +
            `${formatCountOf(report.journal_recovered.salvagedRecords, 'intact record')} after it kept, ${formatCount(report.journal_recovered.droppedRecords)} unreadable ` +
            "(this model's tensors among theirs were encoded again)",
        ]
      : []),
    ...(report.manifest_recovered !== null
      ? [
          `manifest damaged (${report.manifest_recovered.reason}): kept as ${report.manifest_recovered.keptAs}; ` +
            `${formatCountOf(report.manifest_recovered.salvagedEntries, 'entry', 'entries')} kept, ${formatCount(report.manifest_recovered.droppedEntries.length)} dropped, ` +
            `${formatCountOf(report.manifest_recovered.droppedBindings, 'binding')} dropped (this model's bound again; other models' are found by content key at their next load), ` +
            `${formatCountOf(report.manifest_recovered.salvagedRecords, 'journal record')} kept` +
            (report.manifest_recovered.journalEntries > 0 ? `, ${formatCountOf(report.manifest_recovered.journalEntries, 'entry', 'entries')} from it` : '') +
            (report.manifest_recovered.otherJournalEntries > 0 ? `, ${formatCountOf(report.manifest_recovered.otherJournalEntries, 'entry', 'entries')} from other journals` : '') +
            (report.manifest_recovered.keptJournals.length > 0 ? ` (journals kept aside: ${report.manifest_recovered.keptJournals.join(', ')})` : '') +
            `; settings as read: coverage_min ${report.manifest_recovered.coverageMin}, chunk_size ${report.manifest_recovered.chunkSize}` +
            (report.manifest_recovered.defaultedSettings.length > 0 ? `; unreadable settings now the defaults: ${report.manifest_recovered.defaultedSettings.join(', ')}` : ''),
        ]
      : []),
    ...(report.temp_files_removed > 0
      ? [`cleaned ${formatCountOf(report.temp_files_removed, 'temp file')} (${formatBytes(report.temp_bytes_removed)}) left by writers killed mid-write`]
      : []),
    `time    ${report.elapsed_s.toFixed(2)} s (${formatRate(sumBf16Bytes(report) / report.elapsed_s)} of BF16), backend ${report.backend}${report.fallback_reason === null ? '' : ` (${report.backend_requested} did not start)`}, ${formatWorkers(report)}`,
  ];
  // Each summary line within 120 columns, wrapped under its value (8 columns: `tensors `).
  for (const line of summary) lines.push(...wrapHanging(line, ' '.repeat(8)));
  return `${lines.join('\n')}\n`;
}

/** `12 F32, 3 F16`: the model's tensors per dtype, commonest first. */
function describeDtypes(report: BuildReport): string {
  const counts = new Map<string, number>();
  for (const t of report.tensors) counts.set(t.dtype, (counts.get(t.dtype) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).map(([dtype, n]) => `${n} ${dtype}`).join(', ');
}

/**
 * The `format` line of a build that moved the cache past what older releases read: one line, of
 * the format the cache ends in, where one build made both moves (format 3, then 4). An s3:// cache
 * has no manifest: its move is cache.json to format 2 (bindings per file).
 */
function describeFormatMove(report: BuildReport): string {
  if (isS3Url(report.cache)) {
    return (
      "format  the cache now binds a slice for more than one revision of an s3:// object: its cache.json is written as format 2, " +
      'which releases up to 0.56 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache'
    );
  }
  if (report.cache_object_format_moved) {
    return (
      'format  the cache now binds a slice for an s3:// object beside another revision: it is written as manifest format 4, ' +
      'which releases up to 0.57 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache'
    );
  }
  return (
    'format  the cache now binds a slice for more than one file (revisions side by side): it is written as manifest format 3, ' +
    'which releases before 0.56 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache'
  );
}

/**
 * `1 blob put back (missing)`, `4 blobs put back (1 missing, 3 damaged)`; without the kinds where
 * they are not known (s3://). A missing blob is not a damaged one (all were "damaged blobs").
 */
function describeRepaired(report: BuildReport): string {
  const count = (was: 'missing' | 'damaged'): number => report.tensors.filter((t) => t.repairedBlob === was).length;
  const missing = count('missing');
  const damaged = count('damaged');
  const kinds =
    missing + damaged === 1 ? (missing === 1 ? ['missing'] : ['damaged']) : [...(missing > 0 ? [`${missing} missing`] : []), ...(damaged > 0 ? [`${damaged} damaged`] : [])];
  return `${report.repaired} ${report.repaired === 1 ? 'blob' : 'blobs'} put back${kinds.length > 0 ? ` (${kinds.join(', ')})` : ''}`;
}

/** `25.0% smaller`, or `689.0% larger` where tiny tensors grew (a payload is at least 1 KiB). */
function describeRatio(ratio: number): string {
  return ratio <= 1 ? `${formatPercent(1 - ratio, 1)} smaller` : `${formatPercent(ratio - 1, 1)} larger`;
}

/**
 * The worker threads that encoded (`jobs`: --jobs, at most; `workers`: those that ran): `2 worker
 * threads`, `4 of 8 worker threads` where fewer ran (the memory bound, few tensors), or the main
 * thread where none did (--jobs 0, or a model small enough that workers cost more than they save).
 */
function formatWorkers(report: BuildReport): string {
  if (report.workers === 0) {
    // Nothing encoded (every tensor cached or skipped): no claim of where it was encoded.
    if (report.encoded === 0) return report.jobs === 0 ? 'no worker threads (--jobs 0)' : `0 of ${formatCountOf(report.jobs, 'worker thread')} used (nothing encoded)`;
    return report.jobs === 0 ? 'encoded on the main thread (--jobs 0)' : `encoded on the main thread (0 of ${formatCountOf(report.jobs, 'worker thread')} used)`;
  }
  return report.workers === report.jobs ? formatCountOf(report.jobs, 'worker thread') : `${formatCount(report.workers)} of ${formatCountOf(report.jobs, 'worker thread')}`;
}

function sumBf16Bytes(report: BuildReport): number {
  return report.tensors.reduce((sum, t) => sum + (t.status === 'skipped_dtype' || t.status === 'skipped_size' ? 0 : t.sizeBytes), 0);
}
