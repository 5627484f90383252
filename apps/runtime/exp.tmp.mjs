import { monitorEventLoopDelay } from 'node:perf_hooks';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { createFileReader, createPacedReader, createCpuDecoder, loadModel, openShardCache } from '@splitzip/runtime';
const [modelDir, cacheDir, variantsJson] = process.argv.slice(2);
const model = await openSafetensorsModel(modelDir);
const cache = await openShardCache(cacheDir);
let off = 0; const offs = new Map(); for (const t of model.tensors) { offs.set(t.name, off); off += Math.ceil(t.slice.sizeBytes / 64) * 64; }
const arena = new Uint8Array(new SharedArrayBuffer(off)); arena.fill(0);
const allocate = (t) => arena.subarray(offs.get(t.name), offs.get(t.name) + t.slice.sizeBytes);
const variants = JSON.parse(variantsJson);
const res = new Map();
for (let r = 0; r < 3; r++) for (const v of variants) {
  const reader = v.page ? undefined : createPacedReader(createFileReader(), { bytesPerSecond: 1e9, ...(v.pace ?? {}) });
  const h = monitorEventLoopDelay({ resolution: 1 }); h.enable();
  const t = performance.now();
  const backend = v.slice ? createCpuDecoder({ sliceValues: v.slice }) : (v.backend ?? 'cpu');
  const tot = await loadModel(model, v.raw ? null : cache, { allocate, reader, explainMisses: false, concurrency: v.conc ?? 4, backend }).drain();
  const ms = performance.now() - t; h.disable();
  const k = JSON.stringify(v);
  if (!res.has(k)) res.set(k, []);
  res.get(k).push(`${ms.toFixed(0)}ms util ${reader ? (reader.grantedBytes / 1e6 / ms).toFixed(2) : '-'} dec ${tot.decodeMs.toFixed(0)} io ${tot.ioMs.toFixed(0)} eld max ${(h.max / 1e6).toFixed(1)} p99 ${(h.percentile(99) / 1e6).toFixed(1)} mean ${(h.mean / 1e6).toFixed(2)}`);
  await reader?.close();
}
for (const [k, v] of res) console.log(k, '\n   ', v.join('\n    '));
await cache.close(); await model.close();
