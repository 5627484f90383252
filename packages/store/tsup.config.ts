import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig } from 'tsup';

export default defineConfig({
  // content-key: the key alone, without the store (see src/content-key.ts).
  entry: ['src/index.ts', 'src/content-key.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
  // import.meta.url in the CommonJS build (load-s3-sdk.ts requires the SDK relative to this package);
  // maps name src/ (shipped) instead of embedding it (referenceSources).
  esbuildOptions: cjsImportMetaUrl,
});
