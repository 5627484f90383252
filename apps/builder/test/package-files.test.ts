// What the build puts in dist/ for the package (tests run after the build, as turbo orders them).
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { bin: Record<string, string> };

describe('the built package', () => {
  it('has the bin it declares, and the CommonJS library entry', () => {
    expect(existsSync(fileURLToPath(new URL(manifest.bin.splitzip!, root)))).toBe(true);
    expect(existsSync(fileURLToPath(new URL('dist/index.cjs', root)))).toBe(true);
    expect(existsSync(fileURLToPath(new URL('dist/index.d.cts', root)))).toBe(true);
  });

  // A CommonJS copy of the whole CLI (136 KB, 320 KB with its map) was built and shipped, and nothing
  // ran it; so was one of the hash worker (both builds start dist/hash-worker.js).
  it('ships no CommonJS copy of the CLI or of its worker', () => {
    expect(manifest.bin.splitzip).toBe('./dist/cli.js');
    expect(existsSync(fileURLToPath(new URL('dist/cli.cjs', root)))).toBe(false);
    expect(existsSync(fileURLToPath(new URL('dist/hash-worker.js', root)))).toBe(true);
    expect(existsSync(fileURLToPath(new URL('dist/hash-worker.cjs', root)))).toBe(false);
  });
});
