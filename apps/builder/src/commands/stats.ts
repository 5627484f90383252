import { checkLocalModel } from '../check-local-model.js';
import { DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE } from '@splitzip/codec';
import { analyzeModel, type ModelStatsReport, type TensorStats } from '../analyze-model.js';
import { DEFAULT_COVERAGE_MIN } from '../build-cache.js';
import { defineCommand } from '../define-command.js';
import { UsageError } from '../errors.js';
import { formatBytes, formatCount, formatCoveragePercent, formatTable, REPORT_LINE_COLUMNS, wrapHanging } from '../format-units.js';
import { createProgressBar } from '../progress-bar.js';
import { showName } from '../show-name.js';

export const statsCommand = defineCommand({
  name: 'stats',
  description: 'Exponent analysis of a model (writes nothing): coverage, entropy, predicted size',
  args: {
    model: { type: 'positional', description: 'A .safetensors file, a directory of shards, an index.json, or s3://bucket/prefix', valueHint: 'model', required: true },
    coverageMin: { type: 'number', description: 'Top-16 coverage gate', valueHint: 'fraction', default: DEFAULT_COVERAGE_MIN, min: 0, max: 1 },
    chunkSize: { type: 'number', description: 'Values per chunk for the predicted size', valueHint: 'n', default: DEFAULT_CHUNK_SIZE, integer: true, min: MIN_CHUNK_SIZE, max: MAX_CHUNK_SIZE },
    skipNoGain: { type: 'boolean', description: 'Predict a build --skip-no-gain (tensors that would not shrink skipped)' },
    json: { type: 'boolean', description: 'As JSON: { model, coverageMin, chunkSize, skipNoGain, tensors, totals }' },
    quiet: { type: 'boolean', description: 'No progress bar' },
  },
  async run({ args, io, signal }) {
    checkLocalModel(args.model, 'stats', '<model>', true);
    if ((args.chunkSize & (args.chunkSize - 1)) !== 0) {
      throw new UsageError(`option '--chunk-size' must be a power of two, got ${args.chunkSize}`, 'stats');
    }
    const progress = createProgressBar({ stream: io.stderr, enabled: Boolean(io.stderr.isTTY) && !args.quiet });
    let report: ModelStatsReport;
    try {
      report = await analyzeModel(args.model, {
        coverageMin: args.coverageMin,
        chunkSize: args.chunkSize,
        skipNoGain: args.skipNoGain ?? false,
        signal,
        onProgress: (p) => progress.update(p.doneBytes, p.totalBytes, p.tensor),
      });
    } finally {
      progress.finish();
    }
    if (args.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else io.stdout.write(renderStatsReport(report));
    return 0;
  },
});

const VERDICT_TEXT: Record<TensorStats['verdict'], string> = {
  encode: 'encode',
  skip_dtype: 'skip: dtype',
  skip_size: 'skip: size',
  skip_coverage: 'skip: coverage',
  skip_no_gain: 'skip: no gain',
};

export function renderStatsReport(report: ModelStatsReport): string {
  const dash = (v: number | null, f: (x: number) => string): string => (v === null ? '-' : f(v));
  const rows = report.tensors.map((t) => [
    showName(t.name),
    t.dtype,
    `[${t.shape.join(',')}]`,
    formatBytes(t.sizeBytes),
    dash(t.distinctExponents, String),
    formatCoveragePercent(t.coverage, 3),
    dash(t.entropyBits, (x) => x.toFixed(3)),
    dash(t.predictedBytes, formatBytes),
    dash(t.predictedRatio, (x) => x.toFixed(3)),
    t.shrinks === null ? '-' : t.shrinks ? 'yes' : 'no',
    VERDICT_TEXT[t.verdict],
  ]);
  const t = report.totals;
  // Those a default build encodes: one under the gate it skips for coverage (totals.noGainTensors
  // counts as --skip-no-gain does, which skips such a one unread for no gain).
  const encodedNoGain = report.tensors.filter((tensor) => tensor.verdict === 'encode' && tensor.shrinks === false).length;
  const lines = [
    formatTable(
      ['tensor', 'dtype', 'shape', 'raw', 'exps', 'top16', 'H(exp)', 'predicted', 'ratio', 'shrinks', 'build'],
      rows,
      [false, false, false, true, true, true, true, true, true, false, false],
      // Within 120 columns: a row that would not fit has its name on a line of its own (as inspect's).
      { maxLineColumns: REPORT_LINE_COLUMNS },
    ),
    '',
    `model     ${report.model}`,
    `tensors   ${formatCount(t.tensors)}: ${formatCount(t.bf16Tensors)} BF16${t.tooLargeTensors > 0 ? ` (and ${formatCount(t.tooLargeTensors)} too large to cache)` : ''}, ${formatCount(t.encodableTensors)} ` +
      (report.skipNoGain
        ? `pass the ${report.coverageMin} coverage gate and shrink` + (t.noGainTensors > 0 ? `, ${formatCount(t.noGainTensors)} skipped: would not shrink (--skip-no-gain)` : '')
        : `pass the ${report.coverageMin} coverage gate` + (encodedNoGain > 0 ? `; ${formatCount(encodedNoGain)} of them would not shrink (payload not smaller than raw: encoded all the same, build --skip-no-gain skips them)` : '')),
    `raw       ${formatBytes(t.rawBytes)} (${formatBytes(t.bf16Bytes)} BF16)`,
    `predicted ${formatBytes(t.encodableBytes)} -> ${formatBytes(t.predictedBytes)}` + (t.predictedRatio === null ? '' : `, ratio ${t.predictedRatio.toFixed(4)}`),
    `exponents entropy ${t.entropyBits === null ? '-' : t.entropyBits.toFixed(3)} bits/value (all BF16 values); ` +
      `entropy bound ${formatBytes(t.entropyBoundBytes)} for the ${formatBytes(t.encodableBytes)} encoded (predicted ${formatBytes(t.predictedBytes)}); ${formatCount(t.escapeCount)} escapes of ${formatCount(t.elementCount)} values`,
  ];
  // Each line within 120 columns, wrapped under its value (10 columns: `predicted `); the table is one already.
  return `${lines.flatMap((line, index) => (index === 0 ? [line] : wrapHanging(line, ' '.repeat(10)))).join('\n')}\n`;
}
