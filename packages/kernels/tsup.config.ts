import { cjsImportMetaUrl, referenceSources } from '@splitzip/tsup-config';
import { defineConfig, type Options } from 'tsup';

// The Node build's library entries (export condition "node" and the ./node subpath: adds worker
// threads and Dawn). auto-rule (the ./auto-rule subpath): the measured rule alone, no backend code,
// for callers that only need to know what `auto` picks. collect-garbage (./collect-garbage): for
// other packages' worker threads that attach codec arenas (the runtime's decode threads), without
// loading the kernels into them. start-worker (./start-worker): worker threads for other packages,
// under the Node options they can run with, likewise without the kernels. worker-decoder
// (./worker-decoder): the worker-thread decoder without gpu.js, for the runtime's 'workers' backend.
const nodeEntries = {
  node: 'src/node.ts',
  'auto-rule': 'src/auto-rule-entry.ts',
  'collect-garbage': 'src/collect-garbage.ts',
  'start-worker': 'src/start-worker.ts',
  'worker-decoder': 'src/worker-decoder-entry.ts',
};

const nodeBuild: Options = {
  dts: { entry: nodeEntries },
  sourcemap: true,
  clean: false,
  esbuildOptions: cjsImportMetaUrl, // import.meta.url in the CommonJS build (worker scripts); maps name src/
  target: 'es2022',
  // Class names as written: esbuild renames a class whose static members refer to it (_StoreError in
  // console.log's output of every error).
  keepNames: true,
  platform: 'node',
  external: ['gpu.js', '@splitzip/codec', 'webgpu'],
};

export default defineConfig([
  {
    // Browser-safe build: no Node imports reach index.ts.
    entry: { index: 'src/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    esbuildOptions: referenceSources, // maps name src/ (shipped) instead of embedding it
    clean: true,
    target: 'es2022',
    // No keepNames in the browser-safe build: its `__name` statements are side effects a browser
    // app's bundler must keep (every function stayed in the bundle). Names survive without it
    // (esbuild renames only a class whose body names it; errors.ts avoids that).
    keepNames: false,
    platform: 'neutral',
    external: ['gpu.js', '@splitzip/codec'],
  },
  // decode-worker: the worker body of createWorkerDecoder, started as dist/decode-worker.js by both
  // builds (import.meta.url, shimmed in CommonJS), so it is built as ESM only.
  { ...nodeBuild, entry: { ...nodeEntries, 'decode-worker': 'src/decode-worker.ts' }, format: ['esm'] },
  { ...nodeBuild, entry: nodeEntries, format: ['cjs'] },
]);
