// What the build puts in dist/ for the package (tests run after the build, as turbo orders them).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url);
const built = (name: string) => existsSync(fileURLToPath(new URL(`dist/${name}`, root)));

describe('the built package', () => {
  // Both Node builds start dist/decode-worker.js (import.meta.url, shimmed in CommonJS): a
  // decode-worker.cjs was built and shipped that nothing ran.
  it('has every entry in both formats and one worker script, ESM', () => {
    const entries = ['index', 'node', 'auto-rule', 'collect-garbage', 'start-worker'];
    const files = entries.flatMap((name) => [`${name}.js`, `${name}.cjs`, `${name}.d.ts`, `${name}.d.cts`]);
    expect([...files, 'decode-worker.js'].filter((name) => !built(name))).toEqual([]);
    expect(built('decode-worker.cjs')).toBe(false);
  });
});
