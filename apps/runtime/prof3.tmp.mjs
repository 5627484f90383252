import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/default');
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-default');
const arena = new Uint8Array(20e6);
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
const pool = cache.createStagingPool({ slotCount: 4 });
for (const conc of [1, 2, 4]) for (const usePool of [false, true]) {
  const times = [];
  let load;
  for (let i = 0; i < 11; i++) {
    const t = performance.now();
    load = loadModel(model, cache, { allocate, refresh: false, explainMisses: false, concurrency: conc, pool: usePool ? pool : undefined });
    await load.drain();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const slow = [...load.reports].sort((a, b) => (b.ioMs + b.decodeMs) - (a.ioMs + a.decodeMs)).slice(0, 3).map(r => `${r.name}:${r.sizeBytes}:io${r.ioMs.toFixed(1)}:dec${r.decodeMs.toFixed(1)}`);
  console.log('conc', conc, 'pool', usePool, times[5].toFixed(1), 'ms', slow.join(' '));
}
await cache.close(); await model.close();
