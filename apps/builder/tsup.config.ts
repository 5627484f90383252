import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig, type Options } from 'tsup';

const common: Options = {
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build (worker scripts); maps name src/ (referenceSources)
  sourcemap: true,
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
};

export default defineConfig([
  {
    // index: the library (build logic, model analysis, verification) for other apps to reuse;
    // cli: the `splitzip` binary (its shebang is kept); hash-worker: the worker-thread entry,
    // loaded by URL next to the module that spawns it, so it must be a file of its own.
    ...common,
    entry: ['src/index.ts', 'src/cli.ts', 'src/hash-worker.ts'],
    format: ['esm'],
    dts: { entry: 'src/index.ts' },
    clean: true,
  },
  {
    // CommonJS for `require('@splitzip/builder')` only: the bin is dist/cli.js, and a cli.cjs
    // (136 KB, the whole builder again) was shipped that nothing ran; so was a hash-worker.cjs (the
    // CommonJS build starts dist/hash-worker.js too: import.meta.url, shimmed).
    ...common,
    entry: ['src/index.ts'],
    format: ['cjs'],
    dts: { entry: 'src/index.ts' },
    clean: false,
  },
]);
