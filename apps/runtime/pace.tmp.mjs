import { readdirSync, statSync } from 'node:fs';
import { createFileReader, createPacedReader } from '@splitzip/runtime';
const dir = '/work/main/models/runtime-bench-1070000000';
const files = readdirSync(dir).filter(f => f.endsWith('.safetensors')).map(f => `${dir}/${f}`);
const jobs = [];
for (const f of files) { const size = statSync(f).size; for (let off = 0; off + 16e6 <= size; off += 16e6) jobs.push([f, off]); }
for (const conc of [1, 4]) for (const chunk of [1 << 20, 4 << 20]) {
  const reader = createPacedReader(createFileReader(), { bytesPerSecond: 1e9, chunkBytes: chunk });
  const bufs = Array.from({ length: conc }, () => new Uint8Array(16e6));
  let next = 0; const t = performance.now();
  await Promise.all(bufs.map(async (b) => { while (next < jobs.length) { const [f, off] = jobs[next++]; await reader.readExact(f, b, off); } }));
  const s = (performance.now() - t) / 1e3;
  console.log(`conc ${conc} chunk ${chunk >> 20}MiB: ${(reader.grantedBytes / 1e9).toFixed(2)} GB in ${s.toFixed(3)} s = ${(reader.grantedBytes / 1e9 / s).toFixed(3)} GB/s`);
  await reader.close();
}
