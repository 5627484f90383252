import { openSafetensorsModel } from '@splitzip/safetensors';
import { loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/runtime-bench-1070000000');
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-synthetic-1070000000');
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const arena = new Uint8Array(off); arena.fill(0);
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
for (const c of [null, cache, null, cache, null, cache]) {
  const t = performance.now();
  const tot = await loadModel(model, c, { allocate, explainMisses: false }).drain();
  console.log(c ? 'cache' : 'raw  ', (performance.now() - t).toFixed(0), 'ms io', tot.ioMs.toFixed(0), 'decode', tot.decodeMs.toFixed(0));
}
await cache.close(); await model.close();
