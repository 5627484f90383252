// Sums every package's vitest JSON report into the one line CI reads:
//   N passed, N failed[, N skipped]
// A package that declares a test script but left no report (crash, hang, build failure)
// counts as one failed test, so a broken package can never look green.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const args = process.argv.slice(2);
const rcOf = (flag) => {
  const i = args.indexOf(flag);
  return i >= 0 ? Number(args[i + 1]) : 0;
};
const buildRc = rcOf('--build-rc');
const testRc = rcOf('--test-rc');

let passed = 0;
let failed = 0;
let skipped = 0;
const problems = [];

for (const group of ['packages', 'apps', 'tooling']) {
  if (!existsSync(group)) continue;
  for (const name of readdirSync(group)) {
    const dir = join(group, name);
    const pkgPath = join(dir, 'package.json');
    if (!existsSync(pkgPath)) continue;
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
    if (!pkg.scripts?.test) continue;
    const reportPath = join(dir, '.vitest-result.json');
    if (!existsSync(reportPath)) {
      failed += 1;
      problems.push(`${pkg.name}: no test report (the run crashed or did not start)`);
      continue;
    }
    const report = JSON.parse(readFileSync(reportPath, 'utf8'));
    passed += report.numPassedTests ?? 0;
    failed += report.numFailedTests ?? 0;
    skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
    // Suites that failed to load report no tests; count each as a failure.
    const brokenSuites = (report.testResults ?? []).filter(
      (s) => s.status === 'failed' && (s.assertionResults ?? []).length === 0,
    ).length;
    if (brokenSuites > 0) {
      failed += brokenSuites;
      problems.push(`${pkg.name}: ${brokenSuites} test file(s) failed to load`);
    }
  }
}

if (buildRc !== 0) {
  failed += 1;
  problems.push(`build failed (exit ${buildRc})`);
}
if (testRc !== 0 && failed === 0) {
  failed += 1;
  problems.push(`test run exited ${testRc} without a failing test in the reports`);
}

for (const p of problems) console.log(`summary: ${p}`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
