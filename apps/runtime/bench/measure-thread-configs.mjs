#!/usr/bin/env node
// Several thread-decoder configurations (and, with "raw", loads without a cache) in one process,
// load by load in alternating order, from the page cache: the model's tensors and the staging slots
// in one codec arena, as run-bench.mjs loads. Each configuration is one createThreadDecoder
// options object; the first is the baseline of the per-round ratios.
// Usage: node bench/measure-thread-configs.mjs [--rounds 21] [--model DIR --cache DIR]
//          [--configs '[{"raw":true},{"readJobsPerWorker":1},{"readJobsPerWorker":2}]']
import { openSafetensorsModel } from '@splitzip/safetensors';
import { createThreadDecoder, loadModel, openShardCache } from '@splitzip/runtime';
import { planModelArena } from '../bin/plan-model-arena.mjs';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';

const ROUNDS = Number(argValue('--rounds', '21'));
const configs = JSON.parse(argValue('--configs', '[{"raw":true},{"readJobsPerWorker":1},{"readJobsPerWorker":2}]'));

const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const model = await openSafetensorsModel(modelDir);
const cache = await openShardCache(cacheDir);
const { allocate, pool } = planModelArena(model.tensors, cache); // run-bench.mjs's arena

const sides = configs.map((config) => {
  const { raw, concurrency, ...options } = config;
  return { config, raw: raw === true, concurrency, backend: raw === true ? undefined : createThreadDecoder(options), times: [] };
});
const load = async (side) => {
  const startMs = performance.now();
  await loadModel(model, side.raw ? null : cache, { allocate, pool: side.raw ? undefined : pool, backend: side.backend, concurrency: side.concurrency, explainMisses: false }).drain();
  return performance.now() - startMs;
};
for (const side of sides) for (let k = 0; k < 3; k++) await load(side); // warm: workers, JIT, slots
for (let r = 0; r < ROUNDS; r++) for (const side of r % 2 === 0 ? sides : [...sides].reverse()) side.times.push(await load(side));
const [first] = sides;
console.log(`${model.tensors.length} tensors, page cache, ${ROUNDS} alternating rounds (median ms; per-round ratio = the first's time / this one's)`);
for (const side of sides) {
  const ratio = side === first ? '' : `, ${median(side.times.map((t, i) => first.times[i] / t)).toFixed(3)}x the first`;
  console.log(`${JSON.stringify(side.config)}: ${median(side.times).toFixed(1)} ms${ratio}`);
}
for (const side of sides) await side.backend?.close();
process.exit(0);
