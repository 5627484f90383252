import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/default');
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-default');
const arena = new Uint8Array(20e6);
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
for (const [label, mk, c] of [['raw', () => undefined, null], ['raw-reader', () => createFileReader(), null], ['cache-store', () => undefined, cache], ['cache-reader', () => createFileReader(), cache]]) {
  const times = [];
  let tot;
  for (let i = 0; i < 15; i++) {
    const reader = mk();
    const t = performance.now();
    tot = await loadModel(model, c, { allocate, reader, refresh: false, explainMisses: false }).drain();
    times.push(performance.now() - t);
    await reader?.close();
  }
  times.sort((a, b) => a - b);
  console.log(label, times[7].toFixed(1), 'ms; io', tot.ioMs.toFixed(1), 'decode', tot.decodeMs.toFixed(1), 'wall', tot.wallMs.toFixed(1));
}
const sizes = [...cache.store.entries()].map(e => e.compBytes).sort((a,b)=>b-a); console.log('largest blobs', sizes.slice(0,5), 'count', sizes.length);
await cache.close(); await model.close();
