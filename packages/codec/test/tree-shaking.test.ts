// A browser app that imports one function of the codec must not get the whole package: bundled
// and minified as an app's bundler would (esbuild here), a page importing only `decode` or only
// `isSplitZipError` is much smaller than one importing everything. tsup's keepNames once put a
// `__name(fn, "fn")` statement beside every function of dist/index.js: side effects a bundler
// must keep, so every import weighed the same 60 kB.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/**
 * How far a size the README states may be from this measurement: the README's numbers come from
 * this test's bundles, and small changes elsewhere move them a little (its ~40/~4/~61 kB were
 * 10-15% low when a user measured 44/4.7/66.5: the README had not followed the code).
 */
const README_SIZE_TOLERANCE = 0.05;

/** kB as the README writes them: 1,000 bytes. */
const BYTES_PER_KB = 1000;

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

  // The README's Browser use section states these sizes; they are this test's measurement (esbuild,
  // minified, browser ESM, kB of 1,000 bytes), within README_SIZE_TOLERANCE.
  it("matches the sizes the README states", async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    const stated = /only `decode` takes ~([\d.]+) kB \(~([\d.]+) kB of it the two embedded WebAssembly modules\), only `isSplitZipError` ~([\d.]+) kB, everything ~([\d.]+) kB/.exec(readme);
    expect(stated, 'the README sentence giving the bundle sizes').not.toBeNull();
    const [decodeKb, wasmKb, guardKb, wholeKb] = stated!.slice(1).map(Number);
    const kb = (text: string): number => Buffer.byteLength(text) / BYTES_PER_KB;
    const whole = await bundleBytes(`import * as codec from ${JSON.stringify(DIST)}; globalThis.codec = codec;`);
    const decodeOnly = await bundleBytes(`import { decode } from ${JSON.stringify(DIST)}; globalThis.f = decode;`);
    const guardOnly = await bundleBytes(`import { isSplitZipError } from ${JSON.stringify(DIST)}; globalThis.f = isSplitZipError;`);
    // The two embedded modules are base64 strings starting "AGFzbQ" ("\0asm").
    const modules = [...decodeOnly.matchAll(/["'`](AGFzbQ[A-Za-z0-9+/=]*)["'`]/g)].map((match) => match[1]!);
    expect(modules).toHaveLength(2);
    const measured = { decode: kb(decodeOnly), wasm: kb(modules.join('')), guard: kb(guardOnly), whole: kb(whole) };
    const readmeSays = { decode: decodeKb!, wasm: wasmKb!, guard: guardKb!, whole: wholeKb! };
    for (const key of Object.keys(measured) as (keyof typeof measured)[]) {
      const off = Math.abs(readmeSays[key] - measured[key]) / measured[key];
      expect(off, `README says ~${readmeSays[key]} kB for ${key}, measured ${measured[key].toFixed(1)} kB: update the README`).toBeLessThanOrEqual(README_SIZE_TOLERANCE);
    }
  });

  it('leaves no keepNames helper in the build (whose calls a bundler must keep)', async () => {
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(DIST, 'utf8')).not.toMatch(/\b__name\(/);
  });
});
