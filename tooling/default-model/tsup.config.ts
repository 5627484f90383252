import { cjsImportMetaUrl } from '@splitzip/tsup-config';
import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'es2022',
  platform: 'node',
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build
});
