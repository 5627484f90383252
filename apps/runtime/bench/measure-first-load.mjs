#!/usr/bin/env node
// A model's first load in a fresh process, the way a server loads its weights once: loadModel with
// no `allocate` (the runtime allocates every tensor's buffer) from the page cache, raw and from
// the cache, each in its own child process, alternating, medians. What it shows that run-bench.mjs
// (steady state, one preallocated and pre-touched arena) does not: the cost of first writes to
// fresh memory (page faults; ~1.5-3 ms per MiB on this Firecracker VM) and of cold code.
// Usage: node bench/measure-first-load.mjs [--rounds 5] [--model DIR --cache DIR]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { resolveBenchModel } from './build-model-cache.mjs';

const args = process.argv.slice(2);
const argValue = (flag, fallback) => {
  const i = args.indexOf(flag);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};

if (args[0] === '--child') {
  // One load, timed from after the imports and the opens.
  const [, modelDir, cacheDir] = args;
  const { loadModel, openShardCache } = await import('@splitzip/runtime');
  const { openSafetensorsModel } = await import('@splitzip/safetensors');
  const model = await openSafetensorsModel(modelDir);
  const cache = cacheDir === '-' ? null : await openShardCache(cacheDir);
  const startMs = performance.now();
  const totals = await loadModel(model, cache, { explainMisses: false }).drain();
  console.log(JSON.stringify({ ms: performance.now() - startMs, fromCache: totals.fromCache }));
  process.exit(0);
}

const ROUNDS = Number(argValue('--rounds', '5'));
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const self = fileURLToPath(import.meta.url);
const run = (cache) => {
  const child = spawnSync(process.execPath, [self, '--child', modelDir, cache], { encoding: 'utf8' });
  if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1));
};
const times = { raw: [], cache: [] };
let fromCache = 0;
for (let r = 0; r < ROUNDS; r++) {
  for (const side of r % 2 === 0 ? ['raw', 'cache'] : ['cache', 'raw']) {
    const result = run(side === 'raw' ? '-' : cacheDir);
    times[side].push(result.ms);
    if (side === 'cache') fromCache = result.fromCache;
  }
}
const fmt = (xs) => xs.map((x) => x.toFixed(0)).join(' ');
console.log(`first load in a fresh process, ${modelDir}, no allocate, page cache, ${ROUNDS} rounds: raw ${median(times.raw).toFixed(0)} ms (${fmt(times.raw)}), cache ${median(times.cache).toFixed(0)} ms (${fmt(times.cache)}; ${fromCache} tensors from the cache), cache ${(median(times.raw) / median(times.cache)).toFixed(2)}x raw speed`);
