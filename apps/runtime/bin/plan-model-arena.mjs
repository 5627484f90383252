// The preallocated model arena of the main job (load-default-model.mjs) and the benchmarks: every
// tensor at a 256-byte aligned offset, every page touched before any timing (first touches cost
// ~3 ms per MiB on these VMs).
import { createCodecArena } from '@splitzip/codec';
import { createStagingPool, DEFAULT_DECODE_THREADS, DEFAULT_LOAD_CONCURRENCY, DEFAULT_MAX_STAGING_BYTES } from '@splitzip/runtime';

/**
 * kind 'codec': a codec arena (shared, with a kernel scratch area per decode thread) that also holds
 * the staging slots, so decode threads read payloads and write tensors in place (what a loader that
 * lets the runtime place its weights gets); kind 'plain': an ordinary buffer (a SharedArrayBuffer
 * unless the backend is 'cpu') and no pool (the runtime's own). Returns the arena, each tensor's
 * offset, `allocate` for loadModel and the pool (undefined for 'plain').
 */
export function planModelArena(tensors, cache, { kind = 'codec', backend = 'auto', concurrency = DEFAULT_LOAD_CONCURRENCY } = {}) {
  const { offsets, size } = layoutTensorArena(tensors);
  let arena;
  let pool;
  if (kind === 'codec') {
    let largest = 0;
    for (const t of tensors) largest = Math.max(largest, cache.lookupBySlice(t.slice.shardName, t.slice.offsetBytes, t.slice.sizeBytes)?.compBytes ?? 0);
    const slotBytes = Math.max(256, Math.ceil(largest / 256) * 256);
    const slotCount = Math.max(1, Math.min(concurrency, Math.floor(DEFAULT_MAX_STAGING_BYTES / slotBytes)));
    const codecArena = createCodecArena(size + slotBytes * slotCount + 256, { threads: backend === 'cpu' ? 0 : DEFAULT_DECODE_THREADS });
    arena = codecArena.allocate(size);
    pool = createStagingPool({ slotBytes, slotCount, arena: codecArena });
  } else {
    arena = new Uint8Array(backend === 'cpu' ? new ArrayBuffer(size) : new SharedArrayBuffer(size));
  }
  arena.fill(0);
  return { arena, offsets, pool, allocate: (t) => arena.subarray(offsets.get(t.name), offsets.get(t.name) + t.slice.sizeBytes) };
}

/**
 * Where each tensor of `tensors` goes in one arena holding them all: its byte offset by name
 * (256-byte aligned, in model order), and the arena's size.
 */
export function layoutTensorArena(tensors) {
  const offsets = new Map();
  let size = 0;
  for (const tensor of tensors) {
    size = Math.ceil(size / 256) * 256;
    offsets.set(tensor.name, size);
    size += tensor.slice.sizeBytes;
  }
  return { offsets, size };
}
