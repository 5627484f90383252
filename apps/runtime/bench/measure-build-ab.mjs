#!/usr/bin/env node
// Two builds of the runtime in one process, load by load: the same model loaded from the cache
// through the 1 GB/s pacing reader (or the page cache) with this build's loadModel and with another
// build's (--baseline <that build's dist/index.js>), alternating which goes first every round. Whole
// bench runs minutes apart on this shared VM differ by more than most loader changes; in one
// process, both builds see the same load. Each build gets its own staging pool and decode backend
// (its own module instances); tensors land in one shared output arena, as in measure-paced-stages.
// --arena: tensors and both builds' staging slots in one shared codec arena, as run-bench.mjs loads
// (the decode threads then write the tensors in place); default: an ordinary output buffer.
// Usage: node bench/measure-build-ab.mjs --baseline DIR/dist/index.js [--rounds 30] [--burst-mib 4]
//                                        [--page-cache] [--arena] [--model DIR --cache DIR]
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createCodecArena } from '@splitzip/codec';
import { openSafetensorsModel } from '@splitzip/safetensors';
import * as current from '@splitzip/runtime';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';
import { layoutTensorArena } from '../bin/plan-model-arena.mjs';

const args = process.argv.slice(2);
const baselinePath = argValue('--baseline', undefined);
if (baselinePath === undefined) throw new Error('--baseline <another build of @splitzip/runtime: dist/index.js> is required');
const ROUNDS = Number(argValue('--rounds', '30'));
const BURST_BYTES = Number(argValue('--burst-mib', '4')) * 1024 * 1024;
const PAGE_CACHE = args.includes('--page-cache');
const IN_ARENA = args.includes('--arena');
const RATE_BYTES_PER_S = 1e9;

const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const baseline = await import(pathToFileURL(resolve(baselinePath)).href);
const model = await openSafetensorsModel(modelDir);

// One output arena for both builds: every tensor at its own offset, touched once up front.
const { offsets, size } = layoutTensorArena(model.tensors);
// Room for the tensors and two pools (DEFAULT_LOAD_CONCURRENCY slots of the largest payload, at most
// DEFAULT_MAX_STAGING_BYTES each), made once both builds are known.
const POOL_ROOM_BYTES = 2 * (current.DEFAULT_MAX_STAGING_BYTES + (1 << 20));
const sharedArena = IN_ARENA ? createCodecArena(size + 256 + POOL_ROOM_BYTES, { threads: current.DEFAULT_DECODE_THREADS }) : undefined;
const output = (sharedArena?.allocate(size) ?? new Uint8Array(size)).fill(0);
const allocate = (t) => output.subarray(offsets.get(t.name), offsets.get(t.name) + t.slice.sizeBytes);

async function prepare(runtime) {
  const cache = await runtime.openShardCache(cacheDir);
  let largest = 0;
  for (const t of model.tensors) largest = Math.max(largest, cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.compBytes ?? 0);
  const slotBytes = Math.max(256, Math.ceil(largest / 256) * 256);
  const slotCount = Math.max(1, Math.min(runtime.DEFAULT_LOAD_CONCURRENCY, Math.floor(runtime.DEFAULT_MAX_STAGING_BYTES / slotBytes)));
  const arena = sharedArena ?? createCodecArena(slotBytes * slotCount + 256, { threads: runtime.DEFAULT_DECODE_THREADS });
  const pool = runtime.createStagingPool({ slotBytes, slotCount, arena });
  const backend = runtime.createThreadDecoder();
  const load = async () => {
    const paced = PAGE_CACHE
      ? undefined
      : runtime.createPacedReader(runtime.createFileReader(), { bytesPerSecond: RATE_BYTES_PER_S, burstBytes: BURST_BYTES });
    const startMs = performance.now();
    await runtime.loadModel(model, cache, { allocate, reader: paced, pool, backend, explainMisses: false }).drain();
    // Not before the link delivered its last byte, less what the burst lets a read take ahead.
    const endMs = paced === undefined ? performance.now() : Math.max(performance.now(), paced.linkFreeAtMs - (BURST_BYTES / RATE_BYTES_PER_S) * 1e3);
    await paced?.close();
    return endMs - startMs;
  };
  return { load, close: async () => backend.dispose?.() };
}

const sides = [
  ['baseline', await prepare(baseline)],
  ['current', await prepare(current)],
];
for (const [, side] of sides) for (let k = 0; k < 3; k++) await side.load(); // warm: workers, JIT, staging
const times = { baseline: [], current: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, side] of r % 2 === 0 ? sides : [...sides].reverse()) times[name].push(await side.load());
}
const [b, c] = [median(times.baseline), median(times.current)];
const wins = times.current.filter((t, i) => t < times.baseline[i]).length;
console.log(
  `${PAGE_CACHE ? 'page cache' : `paced 1 GB/s, burst ${BURST_BYTES / 1048576} MiB`}${IN_ARENA ? ', in one arena' : ''}, ${model.tensors.length} tensors, ${ROUNDS} alternating rounds: ` +
    `baseline ${b.toFixed(2)} ms, current ${c.toFixed(2)} ms (median; current ${(b / c).toFixed(3)}x, faster in ${wins} of ${ROUNDS} rounds)`,
);
for (const [, side] of sides) await side.close();
process.exit(0);
