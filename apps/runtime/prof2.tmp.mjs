import { open } from 'node:fs/promises';
import { openShardCache, createStagingPool } from '@splitzip/runtime';
const cache = await openShardCache('/work/main/.cache/runtime-bench/cache-default');
const entries = [...cache.store.entries()];
const slot = new Uint8Array(4e6);
for (let r = 0; r < 3; r++) {
  let t = performance.now();
  for (const e of entries) { const h = await open(cache.blobPath(e), 'r'); await h.read(slot, 0, e.compBytes, 0); await h.close(); }
  const a = performance.now() - t;
  t = performance.now();
  for (const e of entries) await cache.readBlob(e.key, slot);
  const b = performance.now() - t;
  t = performance.now();
  const pool = createStagingPool({ slotBytes: 3.1e6, slotCount: 4 });
  const c = performance.now() - t;
  t = performance.now();
  for (const e of entries) { const s = pool.tryAcquire(); const h = await open(cache.blobPath(e), 'r'); await h.read(s.bytes, 0, e.compBytes, 0); await h.close(); pool.release(s) }
  const d = performance.now() - t;
  console.log('pool reads', d.toFixed(1));
  console.log('plain open+read+close', a.toFixed(1), 'store readBlob', b.toFixed(1), 'pool create', c.toFixed(2));
}
await cache.close();
