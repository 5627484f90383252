import { checkCacheLocation } from '../check-cache-location.js';
import { checkLocalModel } from '../check-local-model.js';
import { BLOB_DAMAGE_CODES, DEFAULT_GC_MIN_AGE_MS, isS3Url, MAX_SLICE_STAMPS, type VerifyReport } from '@splitzip/store';
import { defineCommand } from '../define-command.js';
import { findCacheLeftovers, type CacheLeftovers } from '../find-cache-leftovers.js';
import { UsageError } from '../errors.js';
import { checkNotDanglingLink } from '../find-dangling-link.js';
import { openExistingCache } from '../open-existing-cache.js';
import { quoteForShell } from '../quote-for-shell.js';
import { showName } from '../show-name.js';
import { displayWidth } from '../display-width.js';
import { foldTensorName, formatBytes, formatCount, formatCountOf, formatTable, NAME_HANG_INDENT, REPORT_LINE_COLUMNS, wrapAtSpaces, wrapHanging } from '../format-units.js';
import { createProgressBar } from '../progress-bar.js';
import { interruptedError, throwIfInterrupted } from '../throw-if-interrupted.js';
import { verifyModelCache, type ModelCheckReport, type ModelTensorCheck } from '../verify-model-cache.js';

export interface VerifyCommandReport {
  cache: string;
  ok: boolean;
  store: VerifyReport;
  model: ModelCheckReport | null;
  /**
   * What `splitzip gc` would clear, found by its dry run (orphan blobs, a dead writer's lock): notes,
   * not problems (`ok` does not depend on them); null where gc refuses to look (a damaged journal, an
   * older manifest copy: problems above).
   */
  leftovers: CacheLeftovers | null;
}

export const verifyCommand = defineCommand({
  name: 'verify',
  description: "Check a cache's integrity, and with --model that it serves the model bit-exactly",
  notes: [
    'Without --model: every entry has its blob, the right size, a valid header and checksum, and',
    'decodes to the bytes its content key names (skip the decode with --no-decode).',
    'With --model: each tensor of the model is found by its slice key and its content key and decodes',
    'bit-identical to the file, or is reported as not cached with the reason (not BF16, coverage).',
    'Exit code 0 only when all is well. Orphan blobs and a dead writer\'s lock (a gc or build stopped at',
    'once) are noted, naming `splitzip gc`, without failing the check.',
  ],
  args: {
    cache: { type: 'positional', description: 'The cache directory or s3://bucket/prefix', valueHint: 'cache-dir', required: true },
    model: { type: 'string', description: 'A model to check against the cache (local files or s3://bucket/prefix)', valueHint: 'model' },
    coverageMin: { type: 'number', description: "Judge by this coverage gate (default and at least: the cache's)", valueHint: 'fraction', min: 0, max: 1 },
    skipNoGain: {
      type: 'boolean',
      description: 'With --model: judge a cache built with --skip-no-gain',
    },
    decode: { type: 'boolean', description: 'Decode every entry and check it against its content key', default: true },
    json: { type: 'boolean', description: 'Print the report as JSON on stdout' },
    quiet: { type: 'boolean', description: 'No progress bar' },
  },
  async run({ args, io, signal }) {
    checkCacheLocation(args.cache, 'verify', '<cache-dir>');
    if (args.model !== undefined) checkLocalModel(args.model, 'verify', '--model', true);
    // Both judge a model's tensors: without --model they changed nothing and the run looked checked.
    for (const [given, flag] of [[args.coverageMin !== undefined, '--coverage-min'], [args.skipNoGain === true, '--skip-no-gain']] as const) {
      if (given && args.model === undefined) throw new UsageError(`option '${flag}' judges the tensors of a model: give --model <model> with it (without one, verify checks the cache's entries only)`, 'verify');
    }
    // A link to a missing directory read as a directory with no manifest.json: "`splitzip build` makes one", which failed the same way.
    if (!isS3Url(args.cache)) await checkNotDanglingLink(args.cache, 'the cache');
    const store = await openExistingCache(args.cache, { signal, command: 'verify' });
    const enabled = Boolean(io.stderr.isTTY) && !args.quiet;
    // One bar per phase: entries are counted, the model's tensors measured in bytes, and each
    // phase's rate and ETA start with it.
    let progress = createProgressBar({ stream: io.stderr, enabled, unit: 'count' });
    let report: VerifyCommandReport;
    try {
      // verifyModelCache refuses it too; said here before the store's verify, in the option's name.
      if (args.coverageMin !== undefined && args.coverageMin < store.coverageMin) {
        throw new UsageError(
          `option '--coverage-min' ${args.coverageMin} is below the cache's gate: the cache gates at ${store.coverageMin}, and no build into it stores a tensor under that (a build with another gate is refused: SETTINGS_MISMATCH), so those tensors could never be cached; leave it out to judge by the cache's gate, or give one above it`,
          'verify',
        );
      }
      const storeReport = await store
        .verify({
          decode: args.decode,
          signal,
          onProgress: (p) => progress.update(p.done, p.total, 'entries'),
        })
        .catch((error: unknown) => {
          // Ctrl-C: the store stopped between entries with the signal's reason; say so as every command does.
          throw signal.aborted ? interruptedError(signal) : error;
        });
      progress.finish();
      // gc's dry run (one listing of the cache, no lock): what the next gc clears, noted.
      const leftovers = await findCacheLeftovers(store);
      throwIfInterrupted(signal);
      progress = createProgressBar({ stream: io.stderr, enabled });
      let modelReport: ModelCheckReport | null = null;
      if (args.model !== undefined) {
        modelReport = await verifyModelCache(store, args.model, {
          coverageMin: args.coverageMin ?? store.coverageMin,
          skipNoGain: args.skipNoGain ?? false,
          signal,
          onProgress: (p) => progress.update(p.doneBytes, p.totalBytes, p.tensor),
        });
      }
      report = { cache: args.cache, ok: storeReport.ok && (modelReport?.ok ?? true), store: storeReport, model: modelReport, leftovers };
    } finally {
      progress.finish();
      await store.close();
    }
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderVerifyReport(report));
    return report.ok ? 0 : 1;
  },
});

/** Failed tensors for which `is` holds, by shard, where a shard has more than one (a single one is listed on its own). */
function groupFailedByShard(tensors: readonly ModelTensorCheck[], is: (t: ModelTensorCheck) => boolean): Map<string, ModelTensorCheck[]> {
  const byShard = new Map<string, ModelTensorCheck[]>();
  // A push, not a copy a tensor: copying made 200,000 tensors of one shard quadratic (hours).
  for (const t of tensors) if (t.status === 'failed' && is(t)) pushToGroup(byShard, t.shard, t);
  for (const [shard, group] of byShard) if (group.length === 1) byShard.delete(shard);
  return byShard;
}

/** `value` added to `key`'s group of `groups`. */
function pushToGroup<T>(groups: Map<string, T[]>, key: string, value: T): void {
  const group = groups.get(key);
  if (group === undefined) groups.set(key, [value]);
  else group.push(value);
}

/** Where a wrapped `  note:` or `  FAIL` line goes on: under its text. */
const NOTE_INDENT = ' '.repeat(8);

/** verify's notes of what gc clears: no damage, so no FAIL (a cache with them alone is OK). */
function renderLeftovers(cache: string, leftovers: CacheLeftovers | null): string[] {
  if (leftovers === null) return [];
  const lines: string[] = [];
  const blobs = leftovers.orphanBlobs.length;
  if (blobs > 0) {
    lines.push(
      `  note: ${formatCountOf(blobs, 'orphan blob')} (${formatBytes(leftovers.orphanBytes)}) no entry references` +
        (isS3Url(cache) ? `, older than ${DEFAULT_GC_MIN_AGE_MS / 3_600_000} h` : '') +
        ` (a gc or build stopped at once, a crash, or a build not yet committed): \`splitzip gc ${quoteForShell(cache)}\` removes them`,
    );
  }
  const temps = leftovers.tempFiles.length;
  if (temps > 0) {
    lines.push(
      isS3Url(cache)
        ? `  note: ${formatCountOf(temps, 'unfinished upload')} older than ${DEFAULT_GC_MIN_AGE_MS / 3_600_000} h (a writer stopped mid-upload): \`splitzip gc ${quoteForShell(cache)}\` removes ${temps === 1 ? 'it' : 'them'}`
        : `  note: ${formatCountOf(temps, 'temp file')} of dead writers or older than 24 h (${formatTempList(leftovers.tempFiles)}): \`splitzip gc ${quoteForShell(cache)}\` removes ${temps === 1 ? 'it' : 'them'}`,
    );
  }
  const locks = leftovers.staleLocks.length;
  if (locks > 0) {
    lines.push(
      `  note: ${locks === 1 ? 'a stale lock of a dead writer' : `${locks} stale locks of dead writers`} (${leftovers.staleLocks.join(', ')}): ` +
        `\`splitzip gc ${quoteForShell(cache)}\` removes ${locks === 1 ? 'it' : 'them'} (the next writer also recovers the lock)`,
    );
  }
  // Each within 120 columns, wrapped under its text.
  return lines.flatMap((line) => wrapHanging(line, NOTE_INDENT));
}

/** The most temp file names a note lists: a killed build leaves one per blob it was writing (--jobs of them), maybe more. */
const MAX_LISTED_TEMP_FILES = 3;

/** Temp file names for a note: the first MAX_LISTED_TEMP_FILES, then how many more (all in --json: leftovers.tempFiles). */
function formatTempList(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_LISTED_TEMP_FILES).join(', ');
  return paths.length <= MAX_LISTED_TEMP_FILES ? shown : `${shown} and ${paths.length - MAX_LISTED_TEMP_FILES} more`;
}

export function renderVerifyReport(report: VerifyCommandReport): string {
  const lines: string[] = [];
  const s = report.store;
  lines.push(
    `cache ${report.cache}: ${formatCountOf(s.checked, 'entry', 'entries')} checked, ${formatCount(s.passed)} passed, ${formatCount(s.decoded)} decoded, ` +
      `${formatBytes(s.bytesRead)} read, ${formatCountOf(s.problems.length, 'problem')}`,
  );
  // A store error's message starts with its code already.
  for (const p of s.problems) {
    // A problem of the cache's layout (an object no entry owns) names no entry.
    const qualname = showName(p.qualname);
    const what = p.key === '' ? 'cache' : `entry ${p.key} (${qualname})`;
    // The store's message names the entry again (`(entry <key>, file …)`): once is enough.
    const message = showName(p.key === '' ? p.message : p.message.replace(`(entry ${p.key}, `, '(').replace(` (entry ${p.key})`, ''));
    lines.push(...wrapHanging(`  FAIL ${what}: ${message.startsWith(`${p.code}:`) ? '' : `${p.code}: `}${message}`, NOTE_INDENT, REPORT_LINE_COLUMNS, [qualname]));
  }
  // The model to repair from: the one given with --model, else a placeholder.
  const model = report.model === null ? '<model>' : quoteForShell(report.model.model);
  if (s.problems.some((p) => p.code === 'MANIFEST_INVALID')) {
    lines.push(`  manifest older than the journal beside it: \`splitzip build ${model} --out ${quoteForShell(report.cache)} --repair\` keeps its entries that check out and replays the newer journal's commits`);
  }
  if (s.problems.some((p) => p.code === 'JOURNAL_INVALID')) {
    lines.push(`  journal damaged: \`splitzip build ${model} --out ${quoteForShell(report.cache)} --repair\` sets it aside (kept for inspection), keeps every intact record and encodes again the model's tensors the rest held`);
  }
  if (s.problems.some((p) => BLOB_DAMAGE_CODES.has(p.code))) {
    lines.push(`  blobs missing or damaged: \`splitzip build ${model} --out ${quoteForShell(report.cache)} --repair\` puts them back from the model`);
  }
  // The hints above within 120 columns as well (the FAIL lines are wrapped already).
  for (let index = 0; index < lines.length; index++) {
    if (displayWidth(lines[index]!) <= REPORT_LINE_COLUMNS || lines[index]!.startsWith('  FAIL') || lines[index]!.startsWith(NOTE_INDENT)) continue;
    const wrapped = wrapHanging(lines[index]!, index === 0 ? '  ' : '    ');
    lines.splice(index, 1, ...wrapped);
    index += wrapped.length - 1;
  }
  lines.push(...renderLeftovers(report.cache, report.leftovers));
  const m = report.model;
  if (m) {
    lines.push(
      ...wrapHanging(
        `model ${m.model}: ${formatCountOf(m.totals.tensors, 'tensor')}, ${formatCount(m.totals.ok)} cached and bit-identical, ` +
          `${formatCount(m.totals.not_cached)} not cached, ${formatCount(m.totals.failed)} failed`,
        '  ',
      ),
    );
    // Tensors failed for one cause of their shard file: one line per shard (a rewritten shard of a
    // thousand tensors printed a thousand lines of the same cause). Stale: the file holds other
    // bytes than the entries they are bound to; unbound: their bytes are cached, their slices bound
    // to nothing (a renamed shard).
    const staleByShard = groupFailedByShard(m.tensors, (t) => t.stale === true);
    const unboundByShard = groupFailedByShard(m.tensors, (t) => t.unbound === true);
    // Bound for another revision of their s3:// object only: no damage, a build of this one binds beside.
    const otherRevisionByShard = groupFailedByShard(m.tensors, (t) => t.otherRevision === true);
    for (const [shard, tensors] of staleByShard) {
      const name = showName(tensors[0]!.name);
      lines.push(...wrapHanging(`  FAIL ${formatCount(tensors.length)} tensors of ${showName(shard)} (its file holds other bytes than the entries they are bound to: changed, or another model's; e.g. ${name}): ${showName(tensors[0]!.reason ?? '')}`, NOTE_INDENT, REPORT_LINE_COLUMNS, [name]));
    }
    for (const [shard, tensors] of unboundByShard) {
      const name = showName(tensors[0]!.name);
      lines.push(...wrapHanging(`  FAIL ${formatCount(tensors.length)} tensors of ${showName(shard)} (e.g. ${name}): ${showName(tensors[0]!.reason ?? '')}`, NOTE_INDENT, REPORT_LINE_COLUMNS, [name]));
    }
    for (const [shard, tensors] of otherRevisionByShard) {
      const name = showName(tensors[0]!.name);
      lines.push(...wrapHanging(`  FAIL ${formatCount(tensors.length)} tensors of ${showName(shard)} (bound for another revision of the object only; e.g. ${name}): ${showName(tensors[0]!.reason ?? '')}`, NOTE_INDENT, REPORT_LINE_COLUMNS, [name]));
    }
    for (const t of m.tensors) {
      if (t.status !== 'failed' || (t.stale && staleByShard.has(t.shard)) || (t.unbound && unboundByShard.has(t.shard)) || (t.otherRevision && otherRevisionByShard.has(t.shard))) continue;
      const name = showName(t.name);
      lines.push(...wrapHanging(`  FAIL ${name} (${showName(t.shard)} @ ${formatCount(t.offsetBytes)}, ${formatCountOf(t.sizeBytes, 'byte')}): ${showName(t.reason ?? '')}`, NOTE_INDENT, REPORT_LINE_COLUMNS, [name]));
    }
    if (m.tensors.some((t) => t.status === 'failed' && t.otherRevision)) {
      lines.push(
        ...wrapHanging(
          `  another revision's bindings, not damage: \`splitzip build ${quoteForShell(m.model)} --out ${quoteForShell(report.cache)}\` binds this revision's tensors beside them (no --rebind needed; the other revision's stay)`,
          NOTE_INDENT,
        ),
      );
    }
    if (m.tensors.some((t) => t.status === 'failed' && t.unbound)) {
      lines.push(...wrapHanging(`  slices not bound: \`splitzip build ${quoteForShell(m.model)} --out ${quoteForShell(report.cache)}\` binds them to the entries that hold their bytes (no blob is written)`, NOTE_INDENT));
    }
    // Ok, but their shard file is not recorded yet (a copy, a touched file): one line per shard.
    const unrecordedByShard = new Map<string, ModelTensorCheck[]>();
    const notKeptByShard = new Map<string, ModelTensorCheck[]>();
    for (const t of m.tensors) if (t.status === 'ok' && t.unrecorded) pushToGroup(t.stampNotKept ? notKeptByShard : unrecordedByShard, t.shard, t);
    // A line each, under one that says why: the whole reason (the stamps) is in --json, and the README.
    if (unrecordedByShard.size > 0) {
      lines.push(
        isS3Url(report.cache)
          ? '  note: cached; an s3:// cache keeps no local file stamps (by design), so a load checks these once per host:'
          : '  note: cached, but no record of the file as it is now (a load checks their bytes once; `splitzip build` records it):',
      );
    }
    for (const [shard, tensors] of unrecordedByShard) lines.push(...wrapHanging(`    ${showName(shard)}: ${formatCountOf(tensors.length, 'tensor')}`, NOTE_INDENT));
    // Files no record keeps (past MAX_SLICE_STAMPS, changed before those kept): a build does not help, so not under the line above.
    if (notKeptByShard.size > 0) {
      lines.push(
        ...wrapHanging(
          `  note: cached, but never recorded: each file changed before the ${MAX_SLICE_STAMPS} files whose stamps its binding keeps (MAX_SLICE_STAMPS: the files changed most recently keep the slots), so every new process checks their bytes once and a build does not record them (a cache of its own for these files avoids it):`,
          NOTE_INDENT,
        ),
      );
    }
    for (const [shard, tensors] of notKeptByShard) lines.push(...wrapHanging(`    ${showName(shard)}: ${formatCountOf(tensors.length, 'tensor')}`, NOTE_INDENT));
    // Not cached (served raw): non-BF16 tensors counted per dtype, the rest listed with their reason.
    const byDtype = new Map<string, number>();
    const listed: string[][] = [];
    for (const t of m.tensors) {
      if (t.status !== 'not_cached') continue;
      if (t.dtype !== 'BF16') byDtype.set(t.dtype, (byDtype.get(t.dtype) ?? 0) + 1);
      else listed.push([showName(t.name), showName(t.reason ?? '')]);
    }
    if (byDtype.size > 0) {
      lines.push(...wrapHanging(`  not cached, not BF16: ${[...byDtype].map(([dtype, n]) => `${formatCount(n)} ${dtype}`).join(', ')}`, '    '));
    }
    if (listed.length > 0) {
      lines.push('  not cached, BF16:');
      // A table within 120 columns where the names allow; else each name on its line (folded where wider
      // than it), its reason wrapped below it (the stacked table's `tensor` / `reason` / `------` header read as a stray row).
      // One push a line: a spread of a large model's list (150,000 lines) threw a RangeError.
      const table = formatTable(['tensor', 'reason'], listed, []);
      if (table.split('\n').every((line) => displayWidth(line) <= REPORT_LINE_COLUMNS - 4)) {
        for (const line of table.split('\n')) lines.push(`    ${line}`);
      } else {
        for (const [name, reason] of listed) {
          // A name wider than a line folded, its pieces deeper than the reason below it.
          const [first = '', ...more] = foldTensorName(name!, REPORT_LINE_COLUMNS - 4, REPORT_LINE_COLUMNS - 4 - NAME_HANG_INDENT.length);
          lines.push(`    ${first}`);
          for (const piece of more) lines.push(`    ${NAME_HANG_INDENT}${piece}`);
          for (const line of wrapAtSpaces(reason!, REPORT_LINE_COLUMNS - 6)) lines.push(`      ${line}`);
        }
      }
    }
  }
  lines.push(report.ok ? 'OK' : 'FAILED');
  return `${lines.join('\n')}\n`;
}
