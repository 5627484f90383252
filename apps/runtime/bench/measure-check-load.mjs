#!/usr/bin/env node
// What a model's first load costs when its cache has no record of its files: a cache copied to
// another host with the model (new inodes), a model touched or copied, a cache built before file
// stamps. Every cached tensor is then read raw and hashed to its content key once (checkSourceBytes),
// and its stamp recorded. Measured here, in one process, rounds interleaved, medians:
//   raw            = loadModel without a cache;
//   check, inline  = the first load after a touch of every shard, hashes on the loading thread
//                    (a thread decoder told to hash nothing: hashInlineMaxBytes = 2^53 - 1);
//   check, threads = the same with the thread decoder's defaults (hashes on the decode threads);
//   cached         = the next load (stamps recorded): what every later load costs.
// Tensors go into one preallocated arena, touched once: --arena shared (a codec arena, shared
// memory: the threads hash in place, as for any allocate into a codec arena) or --arena plain (an
// ArrayBuffer, like the buffers loadModel allocates itself without allocate: the threads get the
// bytes in 4 MiB pieces copied through shared scratch). Both decoders are warmed up first (a
// server's warmUp()): the numbers leave out thread start-up.
// The shards' mtimes are moved forward a second each round (their stamps change; nothing else does).
// Usage: node bench/measure-check-load.mjs [--rounds 5] [--arena shared|plain] [--model DIR --cache DIR]
import { statSync, utimesSync } from 'node:fs';
import { createCodecArena } from '@splitzip/codec';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { createThreadDecoder, loadModel, openShardCache } from '@splitzip/runtime';
import { resolveBenchModel } from './build-model-cache.mjs';
import { argValue, median } from './bench-helpers.mjs';
import { layoutTensorArena } from '../bin/plan-model-arena.mjs';

const ROUNDS = Number(argValue('--rounds', '5'));
const ARENA = argValue('--arena', 'shared');
if (ARENA !== 'shared' && ARENA !== 'plain') throw new Error('--arena is shared or plain');

const { modelDir, cacheDir } = await resolveBenchModel(argValue('--model', undefined), argValue('--cache', undefined));
const model = await openSafetensorsModel(modelDir);
const { offsets, size } = layoutTensorArena(model.tensors);
const arena = ARENA === 'shared' ? createCodecArena(size + 256).allocate(size) : new Uint8Array(size);
arena.fill(1);
const allocate = (t) => arena.subarray(offsets.get(t.name), offsets.get(t.name) + t.slice.sizeBytes);
const inline = createThreadDecoder({ hashInlineMaxBytes: Number.MAX_SAFE_INTEGER });
const threads = createThreadDecoder();
await Promise.all([inline.warmUp(), threads.warmUp()]);

const touchShards = () => {
  for (const shard of model.shards) {
    const path = shard.path;
    const { atime, mtimeMs } = statSync(path);
    utimesSync(path, atime, new Date(mtimeMs + 1000));
  }
};

/** One load; `cache` null for raw. Returns its ms and how many tensors were checked (reason unchecked). */
const load = async (withCache, backend) => {
  // Opened again each load: a model opened before a touch refuses to read its changed shards.
  const model = await openSafetensorsModel(modelDir);
  const cache = withCache ? await openShardCache(cacheDir) : null;
  let checked = 0;
  let digestMs = 0;
  const startMs = performance.now();
  await loadModel(model, cache, {
    allocate,
    backend,
    explainMisses: false,
    onTensor: (tensor) => {
      if (tensor.reason === 'unchecked') checked += 1;
      digestMs += tensor.report.digestMs;
    },
  }).drain();
  const ms = performance.now() - startMs;
  await cache?.close(); // waits for the stamp records (untimed)
  await model.close();
  return { ms, checked, digestMs };
};


// Warm: JIT, page cache, the cache's own stamps.
await load(false, threads);
touchShards();
await load(true, threads);
await load(true, threads);

const runs = { raw: [], 'check, inline': [], 'check, threads': [], cached: [] };
const checkedCounts = new Set();
const digest = { 'check, inline': [], 'check, threads': [] };
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? ['raw', 'check, inline', 'check, threads'] : ['check, threads', 'check, inline', 'raw'];
  for (const path of order) {
    if (path === 'raw') {
      runs.raw.push((await load(false, threads)).ms);
      continue;
    }
    touchShards();
    const result = await load(true, path === 'check, inline' ? inline : threads);
    runs[path].push(result.ms);
    digest[path].push(result.digestMs);
    checkedCounts.add(result.checked);
    runs.cached.push((await load(true, threads)).ms);
  }
}
await inline.close();
await threads.close();
await model.close();

const raw = median(runs.raw);
const cores = (await import('node:os')).availableParallelism();
console.log(`first load of a model whose cache has no record of its files: ${model.tensors.length} tensors, ${(size / 1e9).toFixed(2)} GB, ${[...checkedCounts].join('/')} checked a load; ${cores} cores, arena ${ARENA}, ${ROUNDS} interleaved rounds (median ms)`);
console.log('| load | ms | rounds | x raw time | hashing CPU ms |');
console.log('|---|---|---|---|---|');
for (const [path, times] of Object.entries(runs)) {
  const ms = median(times);
  console.log(`| ${path} | ${ms.toFixed(0)} | ${times.map((t) => t.toFixed(0)).join(' ')} | ${(ms / raw).toFixed(2)} | ${digest[path] ? median(digest[path]).toFixed(0) : ''} |`);
}
console.log(`check: hashes on the decode threads vs on the loading thread: ${(median(runs['check, inline']) / median(runs['check, threads'])).toFixed(2)}x faster`);
