import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, createPacedReader, loadModel, openShardCache } from '@splitzip/runtime';
const model = await openSafetensorsModel('/work/main/models/runtime-bench-1070000000');
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-synthetic-1070000000');
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const arena = new Uint8Array(off); arena.fill(0);
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
const variants = JSON.parse(process.argv[2]);
for (let r = 0; r < 2; r++) for (const v of variants) {
  const reader = createPacedReader(createFileReader(), { bytesPerSecond: 1e9, ...(v.pace ?? {}) });
  const t = performance.now();
  const tot = await loadModel(model, v.raw ? null : cache, { allocate, reader, explainMisses: false, concurrency: v.conc ?? 4 }).drain();
  const ms = performance.now() - t;
  console.log(JSON.stringify(v), ms.toFixed(0), 'ms; link util', (reader.grantedBytes / 1e6 / ms).toFixed(3), 'decode', tot.decodeMs.toFixed(0), 'waited', reader.waitedMs.toFixed(0));
  await reader.close();
}
await cache.close(); await model.close();
