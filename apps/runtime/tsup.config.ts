import { defineConfig } from 'tsup';

export default defineConfig({
  // decode-thread is the worker body of createThreadDecoder, loaded by URL beside index.js.
  entry: { index: 'src/index.ts', 'decode-thread': 'src/decode-thread.ts' },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts' } },
  sourcemap: true,
  clean: true,
  shims: true,
  target: 'es2022',
  platform: 'node',
});
