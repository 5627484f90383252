// What the build puts in dist/ for the package (tests run after the build, as turbo orders them).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url);
const built = (name: string) => existsSync(fileURLToPath(new URL(`dist/${name}`, root)));

describe('the built package', () => {
  // Both builds start dist/decode-thread.js (import.meta.url, shimmed in CommonJS): a
  // decode-thread.cjs was built and shipped that nothing ran.
  it('has both library builds and one decode thread script, ESM', () => {
    expect(['index.js', 'index.cjs', 'index.d.ts', 'index.d.cts', 'decode-thread.js'].filter((name) => !built(name))).toEqual([]);
    expect(built('decode-thread.cjs')).toBe(false);
  });
});
