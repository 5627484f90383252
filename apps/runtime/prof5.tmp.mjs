import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/runtime-bench-1070000000');
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-synthetic-1070000000');
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const arena = new Uint8Array(off); arena.fill(0);
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
const configs = {
  raw: [null, {}],
  'raw-reader': [null, { reader: 'file' }],
  'cache-store-cpu': [cache, {}],
  'cache-reader-cpu': [cache, { reader: 'file' }],
  'cache-store-workers': [cache, { backend: 'workers' }],
  'cache-reader-workers': [cache, { reader: 'file', backend: 'workers' }],
};
const res = Object.fromEntries(Object.keys(configs).map(k => [k, []]));
for (let round = 0; round < 3; round++) for (const [name, [c, o]] of Object.entries(configs)) {
  const reader = o.reader ? createFileReader() : undefined;
  const t = performance.now();
  const tot = await loadModel(model, c, { allocate, explainMisses: false, ...o, reader }).drain();
  res[name].push(performance.now() - t);
  await reader?.close();
  if (round === 2) console.log(name.padEnd(22), res[name].map(x => x.toFixed(0)).join(' '), 'ms; decode', tot.decodeMs.toFixed(0), 'io', tot.ioMs.toFixed(0));
}
await cache.close(); await model.close();
