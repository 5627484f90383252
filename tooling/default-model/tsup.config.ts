import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build
});
