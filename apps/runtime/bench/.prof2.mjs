import { openSafetensorsModel } from '@splitzip/safetensors';
import { createCodecArena } from '@splitzip/codec';
import { loadModel, openShardCache, createStagingPool, getSharedThreadDecoder } from '@splitzip/runtime';
const dir = process.argv[2], cdir = process.argv[3];
const model = await openSafetensorsModel(dir);
const cache = await openShardCache(cdir);
let size = 0; const off = new Map();
for (const t of model.tensors) { size = Math.ceil(size / 256) * 256; off.set(t.name, size); size += t.slice.sizeBytes; }
let largest = 0; for (const t of model.tensors) largest = Math.max(largest, cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.compBytes ?? 0);
const slotBytes = Math.ceil(largest / 256) * 256;
const arena = createCodecArena(size + 8 * slotBytes + 1024, { threads: 2 });
const bytes = arena.allocate(size); bytes.fill(0);
const pool = createStagingPool({ slotBytes, slotCount: 8, arena });
const dec = getSharedThreadDecoder();
for (let r = 0; r < 5; r++) {
  const t0 = performance.now();
  const load = loadModel(model, cache, { pool, allocate: (t) => bytes.subarray(off.get(t.name), off.get(t.name) + t.slice.sizeBytes), explainMisses: false });
  await load.drain();
  const ms = performance.now() - t0;
  const rs = load.reports.filter((x) => x.source === 'cache');
  const io = rs.reduce((a, x) => a + x.ioMs, 0), d = rs.reduce((a, x) => a + x.decodeMs, 0);
  console.log(`wall ${ms.toFixed(1)} ms; cache ${rs.length}: io ${io.toFixed(1)} decode ${d.toFixed(1)}; stats ${JSON.stringify(dec.stats())}; sizes ${[...new Set(rs.map((x) => x.sizeBytes))].join(',')}`);
}
process.exit(0);
