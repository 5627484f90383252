// What the build puts in dist/ for the package (tests run after the build, as turbo orders them).
import { existsSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url);
const built = (name: string) => existsSync(fileURLToPath(new URL(`dist/${name}`, root)));

/** The bare specifiers a built entry imports, its shared chunks followed (esbuild's metafile). */
async function importedPackages(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL(`dist/${entry}`, root))],
    bundle: true,
    format: 'esm',
    platform: 'node',
    packages: 'external',
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  const output = Object.values(result.metafile.outputs)[0]!;
  return [...new Set(output.imports.filter((entry) => entry.external).map((entry) => entry.path))].sort();
}

describe('the built package', () => {
  // Both Node builds start dist/decode-worker.js (import.meta.url, shimmed in CommonJS): a
  // decode-worker.cjs was built and shipped that nothing ran.
  it('has every entry in both formats and one worker script, ESM', () => {
    const entries = ['index', 'node', 'auto-rule', 'collect-garbage', 'start-worker', 'worker-decoder'];
    const files = entries.flatMap((name) => [`${name}.js`, `${name}.cjs`, `${name}.d.ts`, `${name}.d.cts`]);
    expect([...files, 'decode-worker.js'].filter((name) => !built(name))).toEqual([]);
    expect(built('decode-worker.cjs')).toBe(false);
  });

  // The runtime's 'workers' backend creates the pool when its caller asks (its options checked
  // then, not at the first decode) through this subpath: it must not load gpu.js (~135 ms) or Dawn.
  it('./worker-decoder loads neither gpu.js nor webgpu, as ./node does', async () => {
    expect(await importedPackages('node.js')).toEqual(expect.arrayContaining(['gpu.js']));
    const imported = await importedPackages('worker-decoder.js');
    // The codec's argument checks come from its ./internal subpath, imported, not bundled in.
    expect(imported.filter((name) => !isBuiltin(name))).toEqual(['@splitzip/codec', '@splitzip/codec/internal']);
  });
});
