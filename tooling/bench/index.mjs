// @splitzip/bench-utils: the plumbing behind `pnpm bench` (turbo runs every package's `bench`
// script, then scripts/bench-summary.mjs prints one table of all packages' headline rows).
//
// Wiring a package's bench (how codec, safetensors, kernels and runtime do it):
//   1. package.json devDependencies: "@splitzip/bench-utils": "workspace:*"
//      (then `flock /tmp/splitzip-pnpm.lock pnpm install`).
//   2. At the end of bench/run-bench.mjs, after printing its own table as before:
//        import { writeBenchSummary } from '@splitzip/bench-utils';
//        writeBenchSummary({
//          packageName: '@splitzip/<name>',
//          title: 'what was measured, in a few words',
//          rows: [
//            // an issue target: value measured in THIS run, the target as text, met judged from the value
//            { metric: '<operation> vs <baseline>', value: baselineMs / opMs, unit: 'x',
//              baseline: `<baseline> ${baselineGBps.toFixed(2)} GB/s`, target: '>= 0.9x',
//              met: baselineMs / opMs >= 0.9, note: `${opGBps.toFixed(2)} GB/s` },
//            // a key throughput row: no target
//            { metric: '<operation>', value: opGBps, unit: 'GB/s', baseline: `<baseline> ${baselineGBps.toFixed(2)} GB/s` },
//          ],
//        });
//      Never a constant: every value comes from the run. A target this run cannot judge (e.g. one
//      measured only on a GPU machine) gets met: null (value null if not measured at all).
//   3. A smoke mode (--quick) is not a measurement: skip the write there.
// The file lands in <repo>/.cache/bench/<scope+name>.json (repo = nearest pnpm-workspace.yaml above
// this package; $SPLITZIP_BENCH_DIR overrides the folder). `node scripts/bench-summary.mjs` prints the
// table alone; packages with a bench script but no (or a stale) file are listed as such.
export { BenchSummaryError, isBenchSummaryError } from './src/errors.mjs';
export { findRepoRoot, WORKSPACE_MARKER } from './src/find-repo-root.mjs';
export { BENCH_DIR_ENV, benchSummaryDir, benchSummaryPath } from './src/bench-summary-path.mjs';
export { writeBenchSummary } from './src/write-bench-summary.mjs';
export { readBenchSummaries } from './src/read-bench-summaries.mjs';
export { formatBenchValue, summarizeBenchResults } from './src/summarize-bench-results.mjs';
