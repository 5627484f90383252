import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchSummaryError } from './errors.mjs';

/** The file that marks the monorepo's root. */
export const WORKSPACE_MARKER = 'pnpm-workspace.yaml';
// Levels walked up at most: far deeper than any checkout, and it bounds the walk on odd file systems.
const MAX_LEVELS = 64;
// This package is a workspace package, so its own folder is inside the repo whatever the caller's
// cwd is (turbo runs benches in the package folder, people run them from anywhere). The cwd is the
// fallback for a bench bundled into a single file outside the repo.
const MODULE_DIR = dirname(fileURLToPath(import.meta.url));

/**
 * The nearest folder at or above `fromDir` holding pnpm-workspace.yaml. Without `fromDir`: above this
 * package's folder, else above the cwd.
 */
export function findRepoRoot(fromDir) {
  const starts = fromDir === undefined ? [MODULE_DIR, process.cwd()] : [fromDir];
  for (const start of starts) {
    const root = walkUp(resolve(start));
    if (root !== undefined) return root;
  }
  const tried = starts.map((start) => resolve(start));
  throw new BenchSummaryError('REPO_ROOT_NOT_FOUND', `no ${WORKSPACE_MARKER} at or above ${tried.join(' or ')}`, { fromDir: tried[0], tried });
}

function walkUp(start) {
  let dir = start;
  for (let level = 0; level < MAX_LEVELS; level += 1) {
    if (existsSync(join(dir, WORKSPACE_MARKER))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
  return undefined;
}
