import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig } from 'tsup';

export default defineConfig({
  // index: the library (build logic, model analysis, verification) for other apps to reuse;
  // cli: the `splitzip` binary (its shebang is kept); hash-worker: the worker-thread entry,
  // loaded by URL next to the module that spawns it, so it must be a file of its own.
  entry: ['src/index.ts', 'src/cli.ts', 'src/hash-worker.ts'],
  format: ['esm', 'cjs'],
  dts: { entry: 'src/index.ts' },
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build (worker scripts)
  sourcemap: true,
  clean: true,
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
});
