import { defineConfig } from 'tsup';

export default defineConfig({
  // index: Node entry (files); header: the pure parser, no Node imports (browser-safe).
  entry: ['src/index.ts', 'src/header.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  // The maps point at src/ (shipped, see package.json `files`) instead of embedding it, as the
  // other packages' do (@splitzip/tsup-config's referenceSources; test/source-maps.test.ts).
  esbuildOptions(options) {
    options.sourcesContent = false;
  },
  clean: true,
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
});
