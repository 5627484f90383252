// A browser app that imports one thing of the kernels must not get the whole package: bundled and
// minified as an app's bundler would (esbuild here, gpu.js and the codec left out as the app's own
// dependencies), a page importing only `isKernelsError` is a fraction of one importing everything.
// tsup's keepNames once put a `__name(fn, "fn")` statement beside every function of the browser-safe
// dist/index.js: side effects a bundler must keep, so every import weighed the same.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** Minified browser bundle of `source` (an entry module importing the built kernels): its text. */
async function bundle(source: string): Promise<string> {
  const result = await build({
    stdin: { contents: source, resolveDir: process.cwd(), loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    external: ['gpu.js', '@splitzip/codec'],
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

describe('tree-shaking of the built kernels (a browser app bundling them)', () => {
  it('importing the error guard alone leaves the backends out', async () => {
    const whole = await bundle(`import * as kernels from ${JSON.stringify(DIST)}; globalThis.kernels = kernels;`);
    const guardOnly = await bundle(`import { isKernelsError } from ${JSON.stringify(DIST)}; globalThis.f = isKernelsError;`);
    // Measured at the fix: whole 47.3 kB, the guard alone 6.3 kB (49.5 and 49.3 kB before).
    expect(guardOnly.length).toBeLessThan(whole.length * 0.3);
  });

  it('leaves no keepNames helper in the browser-safe build (whose calls a bundler must keep)', async () => {
    expect(await readFile(DIST, 'utf8')).not.toMatch(/\b__name\(/);
  });
});
