#!/usr/bin/env node
// One summary table of every package's benchmark: the second half of `pnpm bench` (after
// `turbo run bench`), or on its own: node scripts/bench-summary.mjs [--dir DIR] [--max-age-min 180]
//
// Each package's bench writes <repo>/.cache/bench/<scope+name>.json through writeBenchSummary
// (tooling/bench):
//   { "package": "@splitzip/x", "title": "…", "generatedAt": "ISO time", "environment": {…},
//     "rows": [ { "metric": "…", "value": 1.23 | null, "unit": "x" | "GB/s" | …,
//                 "baseline": "what it is compared with, measured in the same run",
//                 "target": ">= 0.9x" | null, "met": true | false | null, "note": "…" } ] }
//
// Packages that declare a `bench` script but left no file are listed as such, and files older than
// --max-age-min are marked stale (their targets are not counted), so a missing benchmark never
// looks green. Exit status 0: the summary never fails the run (the per-package benches print their
// own details and fail on their own).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { benchSummaryDir, findRepoRoot, readBenchSummaries, summarizeBenchResults } from '../tooling/bench/index.mjs';

const REPO = findRepoRoot();
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const benchDir = resolve(flag('--dir', benchSummaryDir({ repoRoot: REPO })));
const maxAgeMs = Number(flag('--max-age-min', '180')) * 60_000;

/** Every workspace package with a bench script. */
function listBenchPackages() {
  const found = [];
  for (const group of ['packages', 'apps', 'tooling']) {
    const groupDir = join(REPO, group);
    if (!existsSync(groupDir)) continue;
    for (const name of readdirSync(groupDir).sort()) {
      const pkgPath = join(groupDir, name, 'package.json');
      if (!existsSync(pkgPath)) continue;
      const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
      if (pkg.scripts?.bench) found.push(pkg.name);
    }
  }
  return found;
}

const { summaries, problems } = readBenchSummaries(benchDir);
const result = summarizeBenchResults({ benchPackages: listBenchPackages(), summaries, maxAgeMs });
const columns = [
  ['package', 'package'],
  ['metric', 'metric'],
  ['value', 'value'],
  ['baseline', 'baseline (same run)'],
  ['target', 'target'],
  ['met', 'met'],
  ['note', 'note'],
];
const widths = columns.map(([key, title]) => Math.max(title.length, ...result.rows.map((r) => r[key].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;

console.log(`benchmark summary (${benchDir})`);
console.log(line(columns.map(([, title]) => title)));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const row of result.rows) console.log(line(columns.map(([key]) => row[key])));
for (const { file, reason } of problems) console.log(`skipped ${file}: ${reason}`);
const tail = [`${result.targetsMet} of ${result.targetsJudged} targets met`];
if (result.missing.length > 0) tail.push(`no results from ${result.missing.join(', ')}`);
if (result.stale.length > 0) tail.push(`stale (not counted): ${result.stale.join(', ')}`);
console.log(tail.join('; '));
