import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'es2022',
  // No keepNames: its `__name(fn, "fn")` statements, one per function, are side effects a browser
  // app's bundler must keep, so importing `decode` alone pulled in the whole package (60 kB
  // minified instead of 40). Names survive without it: esbuild renames only a class whose body
  // names it (errors.ts avoids that); test/tree-shaking.test.ts checks both.
  keepNames: false,
  platform: 'neutral',
});
