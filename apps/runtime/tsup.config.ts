import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig } from 'tsup';

export default defineConfig({
  // decode-thread is the worker body of createThreadDecoder, loaded by URL beside index.js.
  entry: { index: 'src/index.ts', 'decode-thread': 'src/decode-thread.ts' },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts' } },
  sourcemap: true,
  clean: true,
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build (worker scripts)
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
});
