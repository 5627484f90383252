import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/default');
const cache = await openShardCache('/work/main/.cache/splitzip/default');
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const arena = new Uint8Array(off);
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
const reader = createFileReader({ maxIdleHandles: 128 });
const cfg = { raw: [null, undefined], cacheStore: [cache, undefined], cacheReader: [cache, reader] };
const res = {};
for (let r = 0; r < 21; r++) for (const [k, [c, rd]] of Object.entries(cfg)) {
  const t = performance.now(); const tot = await loadModel(model, c, { allocate, reader: rd, explainMisses: false, refresh: false }).drain(); (res[k] ??= []).push(performance.now() - t);
  if (r === 20) console.log(k, res[k].sort((a, b) => a - b)[10].toFixed(1), 'ms median; decode', tot.decodeMs.toFixed(1), 'io', tot.ioMs.toFixed(1));
}
await reader.close(); await cache.close(); await model.close();
