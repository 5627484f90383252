import { defineConfig } from 'tsup';

export default defineConfig({
  // internal: `@splitzip/codec/internal`, the sibling packages' helpers (src/internal.ts).
  entry: ['src/index.ts', 'src/internal.ts'],
  format: ['esm', 'cjs'],
  // `splitting` left at tsup's default, on for ESM only: both ESM entries import one shared chunk,
  // so SplitZipError is one class across them. Set to true it splits CommonJS too, through sucrase,
  // which rewrote every `?.` of index.cjs into an `_optionalChain` helper call; so internal.cjs holds
  // its own copy of the class, which the Symbol.for brand in errors.ts makes `instanceof` accept
  // (test/internal-entry.test.ts).
  dts: true,
  sourcemap: true,
  // The maps point at src/ (shipped, see package.json `files`) instead of embedding it: embedded,
  // the sources were 60% of the tarball, once in the ESM maps and again in the CommonJS ones
  // (test/source-maps.test.ts).
  esbuildOptions(options) {
    options.sourcesContent = false;
  },
  clean: true,
  target: 'es2022',
  // No keepNames: its `__name(fn, "fn")` statements, one per function, are side effects a browser
  // app's bundler must keep, so importing `decode` alone pulled in the whole package (60 kB
  // minified instead of 40). Names survive without it: esbuild renames only a class whose body
  // names it (errors.ts avoids that); test/tree-shaking.test.ts checks both.
  keepNames: false,
  platform: 'neutral',
});
