import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BenchSummaryError, findRepoRoot, WORKSPACE_MARKER } from '../index.mjs';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bench-root-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('findRepoRoot', () => {
  it('finds this monorepo from the package itself, whatever the cwd', () => {
    const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
    const root = findRepoRoot();
    expect(existsSync(join(root, WORKSPACE_MARKER))).toBe(true);
    expect(join(root, 'tooling', 'bench')).toBe(packageDir);
  });

  it('walks up from a nested folder to the nearest marker', () => {
    writeFileSync(join(dir, WORKSPACE_MARKER), 'packages: []\n');
    const nested = join(dir, 'packages', 'x', 'bench');
    mkdirSync(nested, { recursive: true });
    expect(findRepoRoot(nested)).toBe(dir);
    expect(findRepoRoot(dir)).toBe(dir);
  });

  it('throws REPO_ROOT_NOT_FOUND outside any workspace', (ctx) => {
    // Only meaningful where no folder above the temp dir is itself a workspace root: else a visible skip.
    let above = dir;
    while (dirname(above) !== above) {
      above = dirname(above);
      if (existsSync(join(above, WORKSPACE_MARKER))) ctx.skip(`${above} holds ${WORKSPACE_MARKER}: no folder outside a workspace to test from`);
    }
    const nested = join(dir, 'a', 'b');
    mkdirSync(nested, { recursive: true });
    expect(() => findRepoRoot(nested)).toThrow(BenchSummaryError);
    expect(() => findRepoRoot(nested)).toThrow(expect.objectContaining({ code: 'REPO_ROOT_NOT_FOUND', details: expect.objectContaining({ fromDir: nested }) }));
  });
});
