import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig, type Options } from 'tsup';

const common: Options = {
  sourcemap: true,
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build (worker scripts); maps name src/ (referenceSources)
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
};

export default defineConfig([
  {
    // decode-thread is the worker body of createThreadDecoder, loaded by URL beside index.js.
    ...common,
    entry: { index: 'src/index.ts', 'decode-thread': 'src/decode-thread.ts' },
    format: ['esm'],
    dts: { entry: { index: 'src/index.ts' } },
    clean: true,
  },
  {
    // CommonJS for `require('@splitzip/runtime')`: it starts dist/decode-thread.js as the ESM
    // build does (import.meta.url, shimmed), so no decode-thread.cjs is built.
    ...common,
    entry: { index: 'src/index.ts' },
    format: ['cjs'],
    dts: { entry: { index: 'src/index.ts' } },
    clean: false,
  },
]);
