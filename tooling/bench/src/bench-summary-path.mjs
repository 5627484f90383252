import { join, resolve } from 'node:path';
import { BenchSummaryError } from './errors.mjs';
import { findRepoRoot } from './find-repo-root.mjs';

/** Environment variable that moves the results folder (tests, one-off runs); default <repo>/.cache/bench. */
export const BENCH_DIR_ENV = 'SPLITZIP_BENCH_DIR';
// npm's own limit on a package name's length.
const MAX_PACKAGE_NAME_CHARS = 214;
const PACKAGE_NAME = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

/** The folder every bench writes its summary to: $SPLITZIP_BENCH_DIR, else <repo>/.cache/bench. */
export function benchSummaryDir({ repoRoot } = {}) {
  const fromEnv = process.env[BENCH_DIR_ENV];
  if (fromEnv) return resolve(fromEnv);
  return join(repoRoot ?? findRepoRoot(), '.cache', 'bench');
}

/** `@splitzip/codec` → `<dir>/splitzip+codec.json` (`+` is not allowed in npm names, so no two names share a file). */
export function benchSummaryPath(packageName, { dir } = {}) {
  if (typeof packageName !== 'string' || packageName.length > MAX_PACKAGE_NAME_CHARS || !PACKAGE_NAME.test(packageName)) {
    throw new BenchSummaryError('INVALID_PACKAGE_NAME', `not an npm package name: ${JSON.stringify(packageName)}`, { packageName });
  }
  const fileName = `${packageName.replace(/^@/, '').replace('/', '+')}.json`;
  return join(dir ?? benchSummaryDir(), fileName);
}
