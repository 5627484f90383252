import { availableParallelism, cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { benchSummaryPath } from './bench-summary-path.mjs';
import { BenchSummaryError } from './errors.mjs';
import { writeFileAtomic } from './write-file-atomic.mjs';

const ROW_KEYS = new Set(['metric', 'value', 'unit', 'baseline', 'target', 'met', 'note']);

/**
 * Writes one package's headline benchmark rows to <repo>/.cache/bench/<name>.json, atomically.
 * Rows: { metric, value, unit?, baseline?, target?, met?, note? }:
 *   value    a finite number measured in this run, or null for "not measured by this run";
 *   baseline what the value is compared with, measured in the same run (e.g. "copy 6.1 GB/s");
 *   target   the target as text (">= 0.9x"), or null for a plain throughput row;
 *   met      true/false when the run judged the target, null when it cannot (e.g. software GPU).
 * A malformed row throws (INVALID_SUMMARY) rather than writing a summary that misleads.
 * Returns { path, summary }.
 */
export function writeBenchSummary({ packageName, title, rows, environment = {}, raw, dir, outFile } = {}) {
  const path = outFile === undefined ? benchSummaryPath(packageName, { dir }) : resolve(outFile);
  benchSummaryPath(packageName); // validates the name even when outFile is given
  if (typeof title !== 'string' || title.length === 0) invalid(packageName, 'title must be a non-empty string');
  if (!Array.isArray(rows) || rows.length === 0) invalid(packageName, 'rows must be a non-empty array');
  if (environment === null || typeof environment !== 'object') invalid(packageName, 'environment must be an object');
  const summary = {
    package: packageName,
    title,
    generatedAt: new Date().toISOString(),
    environment: { ...describeMachine(), ...environment },
    rows: rows.map((row, index) => checkRow(packageName, row, index)),
    ...(raw === undefined ? {} : { raw }),
  };
  writeFileAtomic(path, `${JSON.stringify(summary, null, 2)}\n`);
  return { path, summary };
}

function describeMachine() {
  return {
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    cores: availableParallelism(),
    cpu: cpus()[0]?.model ?? 'unknown',
    // Benches share the machine with other work: the load says how far to trust the numbers.
    loadAverage1m: Number(loadavg()[0].toFixed(2)),
  };
}

function checkRow(packageName, row, index) {
  const where = `rows[${index}]`;
  if (row === null || typeof row !== 'object' || Array.isArray(row)) invalid(packageName, `${where} must be an object`, index);
  for (const key of Object.keys(row)) if (!ROW_KEYS.has(key)) invalid(packageName, `${where} has an unknown key "${key}"`, index);
  const { metric, value = null, unit = '', baseline = '', target = null, met = null, note } = row;
  if (typeof metric !== 'string' || metric.length === 0) invalid(packageName, `${where}.metric must be a non-empty string`, index);
  if (value !== null && (typeof value !== 'number' || !Number.isFinite(value))) {
    invalid(packageName, `${where}.value (${metric}) must be a finite number or null, got ${String(value)}`, index);
  }
  if (typeof unit !== 'string') invalid(packageName, `${where}.unit (${metric}) must be a string`, index);
  if (typeof baseline !== 'string') invalid(packageName, `${where}.baseline (${metric}) must be a string`, index);
  if (target !== null && (typeof target !== 'string' || target.length === 0)) {
    invalid(packageName, `${where}.target (${metric}) must be a non-empty string or null`, index);
  }
  if (met !== null && typeof met !== 'boolean') invalid(packageName, `${where}.met (${metric}) must be true, false or null`, index);
  if (met !== null && (target === null || value === null)) {
    invalid(packageName, `${where}.met (${metric}) needs a target and a measured value`, index);
  }
  if (note !== undefined && typeof note !== 'string') invalid(packageName, `${where}.note (${metric}) must be a string`, index);
  return { metric, value, unit, baseline, target, met, ...(note ? { note } : {}) };
}

function invalid(packageName, message, rowIndex) {
  throw new BenchSummaryError('INVALID_SUMMARY', `bench summary of ${packageName}: ${message}`, {
    packageName,
    ...(rowIndex === undefined ? {} : { rowIndex }),
  });
}
