#!/usr/bin/env node
// One summary table of every package's benchmark, for `pnpm bench` at the root (run it after
// `turbo run bench`). Each package's bench writes <repo>/.cache/bench/<name>.json:
//
//   { "package": "@splitzip/x", "title": "…", "generatedAt": "ISO time",
//     "rows": [ { "metric": "…", "value": 1.23, "unit": "x" | "GB/s" | …,
//                 "baseline": "what it is compared with, measured in the same run",
//                 "target": ">= 0.9x" | null, "met": true | false | null, "note": "…" } ] }
//
// Packages that declare a `bench` script but left no file (or a stale one, older than
// --max-age-min, default 180) are listed as such, so a missing benchmark never looks green.
// Exit status 0 (a summary never fails the run; the per-package benches print their own details).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const benchDir = resolve(flag('--dir', join(REPO, '.cache', 'bench')));
const maxAgeMs = Number(flag('--max-age-min', '180')) * 60_000;

/** Every workspace package with a bench script: name → folder. */
function benchPackages() {
  const found = new Map();
  for (const group of ['packages', 'apps', 'tooling']) {
    const groupDir = join(REPO, group);
    if (!existsSync(groupDir)) continue;
    for (const name of readdirSync(groupDir)) {
      const pkgPath = join(groupDir, name, 'package.json');
      if (!existsSync(pkgPath)) continue;
      const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
      if (pkg.scripts?.bench) found.set(pkg.name, join(group, name));
    }
  }
  return found;
}

function readSummaries() {
  const out = new Map();
  if (!existsSync(benchDir)) return out;
  for (const file of readdirSync(benchDir).filter((f) => f.endsWith('.json')).sort()) {
    try {
      const summary = JSON.parse(readFileSync(join(benchDir, file), 'utf8'));
      if (typeof summary.package === 'string' && Array.isArray(summary.rows)) out.set(summary.package, summary);
    } catch {
      // A half-written or foreign file is not a summary.
    }
  }
  return out;
}

function formatValue(row) {
  if (typeof row.value !== 'number' || !Number.isFinite(row.value)) return String(row.value ?? 'n/a');
  const digits = Math.abs(row.value) >= 100 ? 0 : Math.abs(row.value) >= 10 ? 1 : 2;
  return `${row.value.toFixed(digits)}${row.unit === 'x' ? 'x' : row.unit ? ` ${row.unit}` : ''}`;
}

const packages = benchPackages();
const summaries = readSummaries();
const header = ['package', 'metric', 'value', 'baseline (same run)', 'target', 'met'];
const rows = [];
const now = Date.now();
for (const name of [...new Set([...packages.keys(), ...summaries.keys()])].sort()) {
  const summary = summaries.get(name);
  if (summary === undefined) {
    rows.push([name, '(no summary: its bench did not write .cache/bench/*.json)', '', '', '', '?']);
    continue;
  }
  const stale = Number.isFinite(Date.parse(summary.generatedAt)) && now - Date.parse(summary.generatedAt) > maxAgeMs;
  for (const row of summary.rows) {
    rows.push([
      name,
      `${row.metric}${row.note ? ` (${row.note})` : ''}${stale ? ' [stale]' : ''}`,
      formatValue(row),
      String(row.baseline ?? ''),
      String(row.target ?? '—'),
      row.met === true ? 'yes' : row.met === false ? 'NO' : '—',
    ]);
  }
}
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
console.log(`benchmark summary (${benchDir})`);
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const row of rows) console.log(line(row));
const withTarget = rows.filter((r) => r[5] === 'yes' || r[5] === 'NO');
console.log(`${withTarget.filter((r) => r[5] === 'yes').length} of ${withTarget.length} targets met`);
