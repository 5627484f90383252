#!/usr/bin/env node
// A model's first load in a fresh process, the way a server loads its weights once: loadModel with
// no `allocate` (the runtime allocates every tensor's buffer) from the page cache, raw and from
// the cache, each in its own child process, alternating, medians. What it shows that run-bench.mjs
// (steady state, one preallocated and pre-touched arena) does not: the cost of first writes to
// fresh memory (page faults; ~1.5-3 ms per MiB on this Firecracker VM) and of cold code.
// Then each child reads one byte of every 4 KiB page of every tensor it was handed, as any consumer
// will (an upload to a GPU, a first forward pass), timed apart ("then touched"): on this VM a page
// first written by the kernel (a raw load's read) still costs its first user-mode access ~5 us
// (measured, 2026-12-04: 16-17 ms for the default model's 14 MB after a raw load, 0.3 ms after a
// cache load, whose decode wrote every page in user mode), so the load time alone favours raw.
// --paced: both loads read through the 1 GB/s pacing reader (run-bench.mjs's (b)).
// Usage: node bench/measure-first-load.mjs [--rounds 5] [--paced] [--model DIR --cache DIR]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';

const args = process.argv.slice(2);

if (args[0] === '--child') {
  // One load, timed from after the imports and the opens.
  const [, modelDir, cacheDir, paced] = args;
  const { createFileReader, createPacedReader, loadModel, openShardCache } = await import('@splitzip/runtime');
  const { openSafetensorsModel } = await import('@splitzip/safetensors');
  const model = await openSafetensorsModel(modelDir);
  const cache = cacheDir === '-' ? null : await openShardCache(cacheDir);
  const reader = paced === 'paced' ? createPacedReader(createFileReader(), { bytesPerSecond: 1e9, burstBytes: 0 }) : undefined;
  const kept = [];
  const startMs = performance.now();
  const totals = await loadModel(model, cache, { explainMisses: false, reader, onTensor: (tensor) => kept.push(tensor.data) }).drain();
  // Not before the link delivered its last byte.
  const endMs = Math.max(performance.now(), reader?.linkFreeAtMs ?? 0);
  // One byte of every page, as the first consumer of the tensors would.
  const touchStartMs = performance.now();
  let sum = 0;
  for (const data of kept) for (let i = 0; i < data.length; i += 4096) sum += data[i];
  const touchMs = performance.now() - touchStartMs;
  console.log(JSON.stringify({ ms: endMs - startMs, touchMs, sum, fromCache: totals.fromCache }));
  process.exit(0);
}

const ROUNDS = Number(argValue('--rounds', '5'));
const PACED = args.includes('--paced');
const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const self = fileURLToPath(import.meta.url);
const run = (cache) => {
  const child = spawnSync(process.execPath, [self, '--child', modelDir, cache, PACED ? 'paced' : 'page-cache'], { encoding: 'utf8' });
  if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1));
};
const times = { raw: [], cache: [] };
const touched = { raw: [], cache: [] };
let fromCache = 0;
const sums = new Set();
for (let r = 0; r < ROUNDS; r++) {
  for (const side of r % 2 === 0 ? ['raw', 'cache'] : ['cache', 'raw']) {
    const result = run(side === 'raw' ? '-' : cacheDir);
    times[side].push(result.ms);
    touched[side].push(result.ms + result.touchMs);
    sums.add(result.sum);
    if (side === 'cache') fromCache = result.fromCache;
  }
}
// Both paths handed out the same bytes (the sampled ones at least).
if (sums.size !== 1) throw new Error(`the raw and cache loads disagree on the sampled bytes: ${[...sums].join(', ')}`);
const fmt = (xs) => xs.map((x) => x.toFixed(0)).join(' ');
console.log(`first load in a fresh process, ${modelDir}, no allocate, ${PACED ? 'paced 1 GB/s' : 'page cache'}, ${ROUNDS} rounds: raw ${median(times.raw).toFixed(0)} ms (${fmt(times.raw)}), cache ${median(times.cache).toFixed(0)} ms (${fmt(times.cache)}; ${fromCache} tensors from the cache), cache ${(median(times.raw) / median(times.cache)).toFixed(2)}x raw speed`);
console.log(`then touched (load + one byte of every page read): raw ${median(touched.raw).toFixed(0)} ms (${fmt(touched.raw)}), cache ${median(touched.cache).toFixed(0)} ms (${fmt(touched.cache)}), cache ${(median(touched.raw) / median(touched.cache)).toFixed(2)}x raw speed`);
