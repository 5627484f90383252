// Loading a package's built CommonJS from a directory whose path needs escaping in a URL.
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A copy of a package (its dist/ and package.json, its node_modules linked) under a path with `#` and `%41`. */
export interface OddPathCopy {
  /** The copy's root, e.g. /tmp/splitzip #1 %41-XXXX/pkg. */
  root: string;
  /** `require` relative to the copy's root: `requireFromCopy('./dist/index.cjs')`. */
  requireFromCopy: NodeJS.Require;
  remove(): void;
}

/**
 * Copies `packageRoot`'s build under a directory named with `#`, `%41` and a space: in a `file:` URL
 * these must be escaped (`%23`, `%2541`, `%20`), and a path turned into a URL by string
 * concatenation loses everything after the `#` or reads `%41` as `A`.
 */
export function copyBuildToOddPath(packageRoot: string): OddPathCopy {
  const parent = mkdtempSync(join(tmpdir(), 'splitzip #1 %41-'));
  const root = join(parent, 'pkg');
  cpSync(join(packageRoot, 'dist'), join(root, 'dist'), { recursive: true });
  cpSync(join(packageRoot, 'package.json'), join(root, 'package.json'));
  symlinkSync(join(packageRoot, 'node_modules'), join(root, 'node_modules'), 'dir');
  return {
    root,
    requireFromCopy: createRequire(join(root, 'package.json')),
    remove: () => rmSync(parent, { recursive: true, force: true }),
  };
}
