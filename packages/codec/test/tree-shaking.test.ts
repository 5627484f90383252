// A browser app that imports one function of the codec must not get the whole package: bundled
// and minified as an app's bundler would (esbuild here), a page importing only `decode` or only
// `isSplitZipError` is much smaller than one importing everything. tsup's keepNames once put a
// `__name(fn, "fn")` statement beside every function of dist/index.js: side effects a bundler
// must keep, so every import weighed the same 60 kB.
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** Minified browser bundle of `source` (an entry module importing the built codec): its bytes. */
async function bundleBytes(source: string): Promise<string> {
  const result = await build({
    stdin: { contents: source, resolveDir: process.cwd(), loader: 'js' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

describe('tree-shaking of the built codec (a browser app bundling it)', () => {
  it('importing one function leaves out what it does not use', async () => {
    const whole = await bundleBytes(`import * as codec from ${JSON.stringify(DIST)}; globalThis.codec = codec;`);
    const decodeOnly = await bundleBytes(`import { decode } from ${JSON.stringify(DIST)}; globalThis.f = decode;`);
    const guardOnly = await bundleBytes(`import { isSplitZipError } from ${JSON.stringify(DIST)}; globalThis.f = isSplitZipError;`);
    // The embedded WebAssembly (base64 of "\0asm" starts "AGFzbQ") goes with decode, not with the error guard.
    expect(whole).toContain('AGFzbQ');
    expect(decodeOnly).toContain('AGFzbQ');
    expect(guardOnly).not.toContain('AGFzbQ');
    // Measured at the fix: whole 60.9 kB, decode alone 40.4 kB, the guard alone 4.1 kB (all 60 kB before).
    expect(decodeOnly.length).toBeLessThan(whole.length * 0.8);
    expect(guardOnly.length).toBeLessThan(whole.length * 0.15);
  });

  it('leaves no keepNames helper in the build (whose calls a bundler must keep)', async () => {
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(DIST, 'utf8')).not.toMatch(/\b__name\(/);
  });
});
