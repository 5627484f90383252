import { defineConfig } from 'tsup';

export default defineConfig([
  {
    // Browser-safe build: no Node imports reach index.ts. auto-rule: the measured rule alone (no
    // backend code), for callers that only need to know what `auto` picks.
    entry: { index: 'src/index.ts', 'auto-rule': 'src/auto-rule-entry.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'es2022',
    platform: 'neutral',
    external: ['gpu.js', '@splitzip/codec'],
  },
  {
    // Node build (export condition "node" and the ./node subpath): adds worker threads and Dawn.
    entry: { node: 'src/node.ts', 'decode-worker': 'src/decode-worker.ts' },
    format: ['esm', 'cjs'],
    dts: { entry: { node: 'src/node.ts' } },
    sourcemap: true,
    clean: false,
    shims: true,
    target: 'es2022',
    platform: 'node',
    external: ['gpu.js', '@splitzip/codec', 'webgpu'],
  },
]);
