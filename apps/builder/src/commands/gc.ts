import { openSafetensorsModel, type SafetensorsModel } from '@splitzip/safetensors';
import {
  DEFAULT_LOCK_TIMEOUT_MS,
  DEFAULT_GC_MIN_AGE_MS,
  DROP_INTENT_STALE_MS,
  TEMP_FILE_MAX_AGE_MS,
  isDroppableEntry,
  isS3Url,
  isStoreError,
  type CacheStore,
  type DropStopped,
  type DropUnboundEntriesReport,
  type GcReport,
  type StaleDropResolution,
  type StoreError,
} from '@splitzip/store';
import { checkCacheLocation } from '../check-cache-location.js';
import { checkLocalModel } from '../check-local-model.js';
import { defineCommand, type CommandIo } from '../define-command.js';
import { describeError } from '../describe-error.js';
import { UsageError } from '../errors.js';
import { displayWidth } from '../display-width.js';
import { fitReportLines, foldTensorName, formatBytes, formatCountOf, NAME_HANG_INDENT, REPORT_LINE_COLUMNS, wrapHanging } from '../format-units.js';
import { checkNotDanglingLink } from '../find-dangling-link.js';
import { openExistingCache } from '../open-existing-cache.js';
import { quoteForShell } from '../quote-for-shell.js';
import { pruneModelBindings, type ModelBindingsReport } from '../judge-model-bindings.js';
import { formatMinAge, parseS3MinAgeMs } from '../parse-min-age.js';
import { renderErrorJson } from '../render-error-json.js';
import { renderModelBindings } from '../render-model-bindings.js';
import { throwIfInterrupted } from '../throw-if-interrupted.js';
import { describeLockWait, describeUnreadableLockWait, watchWriterLock } from '../watch-writer-lock.js';
import { showLines, showName } from '../show-name.js';

/**
 * What `gc --json` prints: the store's report, with --model what became of the model's bindings,
 * and with --drop-unbound-entries the entries removed (a dry run: that would be).
 */
export interface GcCommandReport extends GcReport {
  bindings?: ModelBindingsReport;
  /**
   * `needsExclusive`, dry runs only: false, kept for scripts (it was true on s3://, whose drop needed
   * --exclusive, the user's word that nothing else wrote, until 2026-12-07). s3:// only, the store's:
   * `blobsMissing` (blobs gone under entries the drop did not put back for that), `staleDropIntents`
   * and `staleDropResolution` (killed drops' intents it resolved first), `stopped` (it stopped early).
   */
  unboundEntries?: DropUnboundEntriesReport & { needsExclusive?: false };
  /**
   * With --drop-unbound-entries and --model: the entries bound to no slice once the prune ran (kept
   * for the next drop); `ofModel` of them named as the model's tensors.
   */
  unboundAfterPrune?: { count: number; compBytes: number; ofModel: number };
}

/**
 * The entries a drop would remove now (the store's rule), counted; `ofModel`: those named as one of
 * the model's tensors (its moved tensors among them: a build of it binds them again), the rest
 * other models' (--prune-other-shards) or older revisions'.
 */
function countUnbound(store: CacheStore, model: SafetensorsModel): { count: number; compBytes: number; ofModel: number } {
  const names = new Set(model.tensors.map((tensor) => tensor.name));
  let count = 0;
  let compBytes = 0;
  let ofModel = 0;
  for (const entry of store.entries()) {
    if (!isDroppableEntry(entry)) continue;
    count++;
    compBytes += entry.compBytes;
    if (names.has(entry.qualname)) ofModel++;
  }
  return { count, compBytes, ofModel };
}

/**
 * --exclusive's usage rules, before any request. Since 2026-12-07 the s3:// drop needs it no more
 * (its intent objects make it safe beside builds, loaders, gc and other drops); it is accepted, with
 * no effect, where it was asked for before: with --drop-unbound-entries on s3://. Elsewhere it is
 * an error: on a directory (whose drop takes the writer lock) and without a drop it never meant anything.
 */
function checkExclusive(args: { exclusive?: boolean | undefined; dropUnboundEntries?: boolean | undefined; cache: string }, s3: boolean): void {
  if (args.exclusive && !s3) {
    throw new UsageError("option '--exclusive' applies to s3:// caches only: a directory cache's drop takes its writer lock, which keeps builds and other gc runs out", 'gc');
  }
  if (args.exclusive && !args.dropUnboundEntries) throw new UsageError("option '--exclusive' needs '--drop-unbound-entries' (and is not needed there any more)", 'gc');
}

export const gcCommand = defineCommand({
  name: 'gc',
  description: "Remove a cache's orphan blobs, temp files, stale locks and old journals",
  // The long explanations are the README's (gc's row, "Pruning a model's bindings", "Removing
  // unbound entries"): a 46-line help buried the options.
  notes: [
    'A directory cache takes its writer lock. On s3:// only objects older than --min-age go; the',
    'drop runs beside builds and loaders there (no --exclusive needed since 2026-12-07).',
    `More: README of @splitzip/builder, "Pruning a model's bindings" and "Removing unbound entries".`,
  ],
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    dryRun: { type: 'boolean', description: 'Only report what would be removed' },
    minAge: { type: 'string', description: 's3:// only: keep objects younger than this (default 1h, at least 35m)', valueHint: 'duration' },
    model: { type: 'string', description: 'Also remove the bindings this model left behind (moved tensors, re-shards)', valueHint: 'model' },
    // "other models'": on a shared cache these are mostly theirs (82d1782's shorter text lost it).
    pruneOtherShards: { type: 'boolean', description: "With --model: also remove other shard names' bindings (other models' too)" },
    // Opt-in: the stamps cannot tell another revision's file from this model's replaced one (a download).
    pruneOtherFiles: { type: 'boolean', description: "With --model: judge other files' bindings of its shard names as its own" },
    dropUnboundEntries: { type: 'boolean', description: 'Also remove the entries no slice is bound to, and their blobs' },
    exclusive: { type: 'boolean', description: 's3:// drop only: no effect (kept for scripts)' },
    json: { type: 'boolean', description: 'Print the report as JSON on stdout' },
  },
  async run({ args, io, signal }) {
    checkCacheLocation(args.cache, 'gc', '<cache-dir>');
    const s3 = isS3Url(args.cache);
    // Other models' bindings are kept unless asked, and only a model tells which shard names are its own.
    if (args.pruneOtherShards && args.model === undefined) throw new UsageError("option '--prune-other-shards' needs '--model <model>'", 'gc');
    if (args.pruneOtherFiles && args.model === undefined) throw new UsageError("option '--prune-other-files' needs '--model <model>'", 'gc');
    checkExclusive(args, s3);
    if (args.model !== undefined) checkLocalModel(args.model, 'gc', '--model');
    const minAgeMs = parseS3MinAgeMs(args.minAge, s3, 'gc');
    // The model first: one that is not a model, or has a damaged header, fails before the cache is touched.
    const model: SafetensorsModel | undefined = args.model === undefined ? undefined : await openSafetensorsModel(args.model);
    let report: GcCommandReport | undefined;
    // Reported once the cache is closed, as a report is: a close that throws (a directory store's
    // compaction on close) while it was printed inside made a second --json document.
    // A link to a missing directory read as a directory with no manifest.json: "`splitzip build` makes one", which failed the same way.
    if (!s3) await checkNotDanglingLink(args.cache, 'the cache');
    let failure: DropFailure | undefined;
    try {
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
      try {
        const work = async (): Promise<GcCommandReport | DropFailure> => {
          // Ctrl-C between the steps: each is whole (a prune is one new manifest generation, or none).
          throwIfInterrupted(signal);
          // The collection first: it reports what its writer session finishes (an interrupted fold,
          // a dead writer's lock), which a prune's session before it did unreported, where a dry run
          // reported it. The prune's new generation removes the journal it folds.
          // A drop the store refuses (a damaged manifest's kept copy, a damaged journal) fails the
          // command before the collection changes anything: its dry run is a look, no lock.
          if (args.dropUnboundEntries && !args.dryRun) await store.dropUnboundEntries({ dryRun: true, ...(minAgeMs !== undefined ? { minAgeMs } : {}) });
          throwIfInterrupted(signal);
          const gc = await store.gc({ dryRun: args.dryRun, ...(minAgeMs !== undefined ? { minAgeMs } : {}) });
          throwIfInterrupted(signal);
          // Before the prune: an entry whose last binding this run's prune removes may be a tensor
          // of the model that moved (a re-shard, a rename), which its next load or build binds
          // again by content key; it stays until the next run. Its blobs are the drop's (after its
          // manifest): no orphan is left for the next gc.
          // On s3:// only entry objects older than --min-age go (a writer PUTs its entry before its aliases).
          // --exclusive (s3:// only, checked above) is passed on: the store accepts it, no effect.
          let unboundEntries: GcCommandReport['unboundEntries'];
          if (args.dropUnboundEntries && args.dryRun) {
            unboundEntries = { ...(await store.dropUnboundEntries({ dryRun: true, ...(minAgeMs !== undefined ? { minAgeMs } : {}) })), needsExclusive: false };
          } else if (args.dropUnboundEntries) {
            try {
              unboundEntries = await store.dropUnboundEntries({ dryRun: false, ...(args.exclusive ? { exclusive: true } : {}), ...(minAgeMs !== undefined ? { minAgeMs } : {}) });
            } catch (error) {
              // The real collection above has changed the cache: a drop that fails now (a request
              // or file error; a directory's journal damaged since the dry run) must not cost its report.
              // An interrupt (ABORTED) is the CLI's; a dry run changed nothing.
              if (!isStoreError(error) || signal.aborted) throw error;
              return { dropFailure: error, collection: gc };
            }
          }
          // A Ctrl-C during the drop (which runs to its end) says what the drop did: the bare
          // "interrupted" read as if nothing had been removed.
          throwIfInterrupted(
            signal,
            unboundEntries === undefined || unboundEntries.dryRun || unboundEntries.count === 0
              ? ''
              : `: stopped after removing ${formatCountOf(unboundEntries.count, 'unbound entry', 'unbound entries')} (${formatBytes(unboundEntries.reclaimedBytes)}) and their blobs${model === undefined ? '' : '; the --model prune did not run'}`,
          );
          const bindings = model === undefined ? undefined : await pruneModelBindings(store, model, args.model!, { dryRun: args.dryRun, pruneOtherShards: args.pruneOtherShards, pruneOtherFiles: args.pruneOtherFiles });
          // Entries the prune left with no binding stay for the next drop: counted, so that the
          // run does not read as if there were none (a build of the model binds its moved tensors
          // among them; a drop first makes that build encode them again).
          const leftUnbound = unboundEntries === undefined || model === undefined || bindings === undefined || args.dryRun ? undefined : countUnbound(store, model);
          return {
            ...gc,
            ...(bindings === undefined ? {} : { bindings }),
            ...(unboundEntries === undefined ? {} : { unboundEntries }),
            ...(leftUnbound === undefined ? {} : { unboundAfterPrune: leftUnbound }),
          };
        };
        const task = work();
        const outcome = await (watch?.during(task) ?? task);
        if ('dropFailure' in outcome) failure = outcome;
        else report = outcome;
      } finally {
        watch?.stop();
        if (failure === undefined) await store.close();
        else {
          const pending = failure;
          await store.close().catch((closeError: unknown) => {
            pending.closeError = closeError;
          });
        }
      }
    } finally {
      await model?.close();
    }
    if (failure !== undefined) return reportDropFailure(failure, { io, json: args.json === true, s3, modelPrune: model !== undefined, minAgeMs: minAgeMs ?? DEFAULT_GC_MIN_AGE_MS, cache: args.cache });
    if (report === undefined) throw new Error('gc: no report and no failure'); // unreachable: work() returns one of them
    if (args.json) {
      io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return 0;
    }
    const verb = report.dryRun ? 'would remove' : 'removed';
    const lines = renderCollection(report, s3, minAgeMs ?? DEFAULT_GC_MIN_AGE_MS, args.cache);
    if (report.bindings !== undefined) appendLines(lines, renderModelBindings(report.bindings, args.cache, verb));
    const dropped = report.unboundEntries;
    if (dropped !== undefined) {
      lines.push(`${verb} ${formatCountOf(dropped.count, 'unbound entry', 'unbound entries')} (${formatBytes(dropped.reclaimedBytes)})`);
      for (const entry of dropped.entries) appendLines(lines, renderDroppedEntry(entry));
      if (dropped.blobsLeft.length > 0) {
        lines.push(`left ${dropped.blobsLeft.length} of their blobs that could not be removed (the next gc removes them as orphans):`);
        appendLines(lines, dropped.blobsLeft.map((p) => `  ${p}`));
      }
      appendLines(lines, renderBlobsMissing(dropped.blobsMissing ?? [], args.cache));
      appendLines(lines, renderRestoreConflicts(dropped.restoreConflicts ?? []));
      const dropIntents = dropped.staleDropIntents ?? [];
      if (dropIntents.length > 0) lines.push(`resolved ${formatCountOf(dropIntents.length, 'intent object')} of killed drops first (entry put back if bound, else its blob removed)`);
      appendLines(lines, renderStaleDropResolution(dropped.staleDropResolution, args.cache));
      appendLines(lines, renderDropStopped(dropped.stopped));
    }
    const left = report.unboundAfterPrune;
    if (left !== undefined && left.count > 0) {
      lines.push(
        `kept ${formatCountOf(left.count, 'entry', 'entries')} (${formatBytes(left.compBytes)}) bound to no slice once the prune ran, for the next --drop-unbound-entries` +
          (left.ofModel === 0
            ? ''
            : `; ${left.ofModel === left.count ? (left.count === 1 ? 'it is' : 'all are') : `${left.ofModel} are`} named as this model's tensors: build the model first (\`splitzip build ${args.model === undefined ? '<model>' : quoteForShell(args.model)} --out ${quoteForShell(args.cache)}\`), which binds its moved tensors among them instead of encoding them again`),
      );
    }
    if (report.dryRun && listsAnything(report)) lines.push('run without --dry-run to remove them');
    io.stdout.write(`${fitReportLines(lines).join('\n')}\n`);
    return 0;
  },
});

/**
 * A dropped entry's line, `  <key> <name> (<size>)`, within 120 columns: a long tensor name starts a
 * line of its own or folds (foldTensorName, as build's and verify's), its pieces and the size 6
 * columns in; a line that fits is as it was (--json keeps the name whole).
 */
export function renderDroppedEntry(entry: { key: string; qualname: string; compBytes: number }): string[] {
  const name = showName(entry.qualname);
  const line = `  ${entry.key} ${name} (${formatBytes(entry.compBytes)})`;
  return displayWidth(line) <= REPORT_LINE_COLUMNS ? [line] : wrapHanging(line, `  ${NAME_HANG_INDENT}`, REPORT_LINE_COLUMNS, [name]);
}

/** Whether a dry run's report names anything the real run would remove (its last line then says how). */
function listsAnything(report: GcCommandReport): boolean {
  return (
    report.orphanBlobs.length + report.tempFiles.length + report.oldJournals.length + report.staleLocks.length + (report.orphanStamps?.length ?? 0) + (report.orphanAliases?.length ?? 0) > 0 ||
    report.finishedCompaction !== undefined ||
    (report.bindings?.prune.length ?? 0) > 0 ||
    (report.unboundEntries?.count ?? 0) > 0
  );
}

/**
 * The lines for a drop's `blobsMissing` (s3://: blobs found gone under entries a writer bound
 * meanwhile, which the drop so did not put back: an entry without its blob fails every load; the
 * slice resolves to nothing, read raw): what it means and the build that stores them again, the
 * cache quoted to copy. None when empty.
 */
export function renderBlobsMissing(blobsMissing: readonly string[], cache: string): string[] {
  if (blobsMissing.length === 0) return [];
  return [
    `found ${formatCountOf(blobsMissing.length, 'blob')} missing under entries a writer bound meanwhile: not put back, their tensors load raw until a build`,
    `  ${buildAgainLine(cache)}`,
    ...renderObjectNames(blobsMissing),
  ];
}

/**
 * The lines for a drop's `restoreConflicts` (s3://: entries a writer bound meanwhile whose put back
 * was refused each time): not put back yet, their intents kept for a later gc or drop. None when empty.
 */
export function renderRestoreConflicts(restoreConflicts: readonly string[]): string[] {
  if (restoreConflicts.length === 0) return [];
  return [
    `could not put back ${formatCountOf(restoreConflicts.length, 'entry', 'entries')} a writer bound meanwhile (refused each time): a later gc or drop puts them back`,
    ...renderObjectNames(restoreConflicts),
  ];
}

/** The command that stores missing tensors again (a build encodes a slice that resolves to nothing). */
function buildAgainLine(cache: string): string {
  return `\`splitzip build <model> --out ${quoteForShell(cache)}\` with each model that uses the cache stores them again`;
}

/**
 * Object names, one a line 2 columns in, within 120 columns: a longer one folds (foldTensorName),
 * its rest 6 columns in; control characters shown escaped (showName).
 */
function renderObjectNames(names: readonly string[]): string[] {
  const lines: string[] = [];
  const first = REPORT_LINE_COLUMNS - 2;
  for (const name of names) {
    const [head, ...rest] = foldTensorName(showName(name), first, first - NAME_HANG_INDENT.length);
    lines.push(`  ${head}`);
    for (const piece of rest) lines.push(`  ${NAME_HANG_INDENT}${piece}`);
  }
  return lines;
}

/**
 * The lines for what resolving killed drops' intents did (s3://, gc's or a drop's
 * `staleDropResolution`), each only when not empty: entries put back, blobs removed, bound entries
 * whose blob was gone (not put back: read raw until a build), damaged intents left, the first failure.
 */
export function renderStaleDropResolution(resolution: StaleDropResolution | undefined, cache: string): string[] {
  if (resolution === undefined) return [];
  const lines: string[] = [];
  const { restored, blobsDeleted, blobsMissing, intentsInvalid = [], restoreConflicts = [], entriesLost = [], error } = resolution;
  if (restored.length > 0) {
    lines.push(`put back ${formatCountOf(restored.length, 'entry', 'entries')} of killed drops (bound since the drop judged them):`);
    appendLines(lines, renderObjectNames(restored));
  }
  if (blobsDeleted.length > 0) {
    lines.push(`removed ${formatCountOf(blobsDeleted.length, 'blob')} of killed drops' unbound entries:`);
    appendLines(lines, renderObjectNames(blobsDeleted));
  }
  if (blobsMissing.length > 0) {
    lines.push(`found ${formatCountOf(blobsMissing.length, 'bound entry', 'bound entries')} of killed drops without a blob: not put back, their tensors load raw until a build`);
    lines.push(`  ${buildAgainLine(cache)}`);
    appendLines(lines, renderObjectNames(blobsMissing));
  }
  if (restoreConflicts.length > 0) {
    lines.push(`could not put back ${formatCountOf(restoreConflicts.length, 'bound entry', 'bound entries')} of killed drops (refused each time): their intents stay for the next gc or drop`);
    appendLines(lines, renderObjectNames(restoreConflicts));
  }
  if (intentsInvalid.length > 0) {
    lines.push(`resolved ${formatCountOf(intentsInvalid.length, 'damaged intent object')} (no drop intent, or no valid entry in it) by name: never put back`);
    appendLines(lines, renderObjectNames(intentsInvalid));
  }
  if (entriesLost.length > 0) {
    lines.push(`lost ${formatCountOf(entriesLost.length, 'bound entry', 'bound entries')} of damaged intents (nothing valid to put back): their tensors load raw until a build`);
    lines.push(`  ${buildAgainLine(cache)}`);
    appendLines(lines, renderObjectNames(entriesLost));
  }
  if (error !== undefined) lines.push(`resolving killed drops' intents failed (those intents stay for the next gc or drop): ${showName(`${error.code}: ${error.message}`)}`);
  return lines;
}

/** Why a drop stopped early, worded (store's DropStopped reason: half its DROP_INTENT_STALE_MS). */
const DROP_STOP_REASONS: Record<DropStopped['reason'], string> = {
  'intent-gone': 'its intent object was gone (a gc or drop took it for a killed drop\'s)',
  'intent-old': `its intent object was ${formatMinAge(DROP_INTENT_STALE_MS / 2)} old (the drop paused, or this machine's clock behind)`,
  paused: `it ran ${formatMinAge(DROP_INTENT_STALE_MS / 2)} into one batch (paused: asleep, or in a debugger)`,
};

/**
 * The lines for a drop that stopped early (s3://, the store's `stopped`): why, that the other
 * unbound entries stay for a later drop, and the entries it had deleted whose intents a later gc or
 * drop resolves. None when it did not stop.
 */
export function renderDropStopped(stopped: DropStopped | undefined): string[] {
  if (stopped === undefined) return [];
  const lines = [`stopped early: ${DROP_STOP_REASONS[stopped.reason]}; the other unbound entries stay for a later --drop-unbound-entries`];
  if (stopped.leftToResolver.length > 0) {
    lines.push(
      `left ${formatCountOf(stopped.leftToResolver.length, 'deleted entry', 'deleted entries')} to a later gc or drop, which removes their blobs (or puts back one bound by then) once their intents are ${formatMinAge(DROP_INTENT_STALE_MS)} old:`,
    );
    appendLines(lines, renderObjectNames(stopped.leftToResolver));
  }
  return lines;
}

/** A real drop the store refused (or failed) after the real collection ran: what that removed is still reported. */
interface DropFailure {
  dropFailure: StoreError;
  collection: GcReport;
  /** The cache's close failing after it (told in the same message: one document). */
  closeError?: unknown;
}

/** The collection's text lines (the store's gc report): what every run prints first. */
export function renderCollection(report: GcReport, s3: boolean, minAgeMs: number, cache = '<cache>'): string[] {
  const verb = report.dryRun ? 'would remove' : 'removed';
  const lines = [
    s3
      ? `${verb} ${formatCountOf(report.orphanBlobs.length, 'orphan blob')} (${formatBytes(report.orphanBytes)}), ${formatCountOf(report.tempFiles.length, 'unfinished upload')}, ` +
        `${formatCountOf(report.orphanStamps?.length ?? 0, 'stamp object')} no reader takes`
      : `${verb} ${formatCountOf(report.orphanBlobs.length, 'orphan blob')} (${formatBytes(report.orphanBytes)}), ${formatCountOf(report.tempFiles.length, 'temp file')}, ` +
        `${formatCountOf(report.oldJournals.length, 'old journal')}, ${formatCountOf(report.staleLocks.length, 'stale lock')}`,
    ...[...report.orphanBlobs, ...report.tempFiles, ...report.oldJournals, ...report.staleLocks, ...(report.orphanStamps ?? [])].map((path) => `  ${path}`),
  ];
  // S3 only, each only when non-zero: the dropped keys' alias objects, and what --min-age kept
  // (a dry run that listed nothing read as if the cache held nothing for a later gc).
  const aliases = report.orphanAliases ?? [];
  if (aliases.length > 0) {
    lines.push(`${verb} ${formatCountOf(aliases.length, 'alias object')} of dropped entries (below their slices' binding)`);
    appendLines(lines, aliases.map((path) => `  ${path}`));
  }
  const young = report.keptYoung;
  const youngParts =
    young === undefined
      ? []
      : [
          young.orphanBlobs > 0 ? `${formatCountOf(young.orphanBlobs, 'orphan blob')} (${formatBytes(young.orphanBytes)})` : '',
          young.tempFiles > 0 ? formatCountOf(young.tempFiles, 'unfinished upload') : '',
          young.orphanStamps > 0 ? formatCountOf(young.orphanStamps, 'stamp object') : '',
          young.orphanAliases > 0 ? formatCountOf(young.orphanAliases, 'alias object') : '',
        ].filter(Boolean);
  if (youngParts.length > 0) lines.push(`${report.dryRun ? 'would keep' : 'kept'} ${youngParts.join(', ')} younger than --min-age (${formatMinAge(minAgeMs)}): a later gc removes them`);
  // S3 only, each only when non-zero: blobs a drop's intent object keeps (it may put their entry
  // back), and a killed drop's intents resolved (store README "S3 layout", Removing entries).
  const underDrop = report.keptUnderDrop ?? 0;
  if (underDrop > 0) lines.push(`${report.dryRun ? 'would keep' : 'kept'} ${formatCountOf(underDrop, 'orphan blob')} a running or killed --drop-unbound-entries may put back: a later gc judges them`);
  const staleIntents = report.staleDropIntents ?? [];
  if (staleIntents.length > 0) {
    lines.push(`${report.dryRun ? 'would resolve' : 'resolved'} ${formatCountOf(staleIntents.length, 'intent object')} of killed drops (entry put back if bound, else its blob removed)`);
  }
  appendLines(lines, renderStaleDropResolution(report.staleDropResolution, cache));
  if (report.finishedCompaction !== undefined) {
    lines.push(`${report.dryRun ? 'would finish' : 'finished'} the interrupted fold of ${report.finishedCompaction} into manifest.json`);
  }
  const kept = report.keptTempFiles ?? [];
  if (kept.length > 0) {
    lines.push(
      // Within 120 columns (~210 before); which writers, and why only age judges them: README's gc row.
      `kept ${formatCountOf(kept.length, 'temp file')} (${formatBytes(report.keptTempBytes ?? 0)}) a writer may still be writing: each goes once ${TEMP_FILE_MAX_AGE_MS / 3600_000} h old`,
    );
    appendLines(lines, kept.map((p) => `  ${p}`));
  }
  if (report.unknownFiles.length > 0) {
    lines.push(`left ${report.unknownFiles.length} ${s3 ? 'objects' : 'files'} the cache did not write:`);
    appendLines(lines, report.unknownFiles.map((p) => `  ${p}`));
  }
  return lines;
}

/** One push per line: push(...lines) throws RangeError past ~125,000 arguments (a drop of that many entries). */
function appendLines(lines: string[], more: readonly string[]): void {
  for (const line of more) lines.push(line);
}

/**
 * A real drop that failed after the collection: the collection's report (text on stdout; --json:
 * its fields with `error` added, one document, as an interrupted build's), then the store's error
 * with what ran and what did not, exit 1. It was thrown away before: the user was never told what
 * the collection removed.
 */
function reportDropFailure(failure: DropFailure, options: { io: CommandIo; json: boolean; s3: boolean; modelPrune: boolean; minAgeMs: number; cache: string }): number {
  const { dropFailure: error, collection } = failure;
  const message =
    `${describeError(error)}; the collection ran before it (the report says what it removed)${options.modelPrune ? '; the --model prune did not run' : ''}` +
    (failure.closeError === undefined ? '' : `; closing the cache failed too: ${describeError(failure.closeError)}`);
  if (options.json) {
    const carrier = { code: error.code, path: error.path, entry: error.entry, details: error.details, context: { report: collection } };
    options.io.stdout.write(renderErrorJson(carrier, message));
  } else {
    options.io.stdout.write(`${fitReportLines(renderCollection(collection, options.s3, options.minAgeMs, options.cache)).join('\n')}\n`);
  }
  // Escaped as the other stderr lines (run-cli's errors): a path or entry name may hold control characters.
  options.io.stderr.write(`splitzip gc: error: ${showLines(message)}\n`);
  return 1;
}
