import { decodeChunks, type PayloadMeta } from '@splitzip/codec';

/** Chunk range [first, end) of task k of taskCount. */
export function taskChunks(k: number, taskCount: number, chunkCount: number): [number, number] {
  return [Math.floor((k * chunkCount) / taskCount), Math.floor(((k + 1) * chunkCount) / taskCount)];
}

/**
 * Claims tasks until none are left and decodes each into `out` (indexed from value 0). On an
 * error it marks every task claimed, so the other threads stop early, and rethrows.
 */
export function decodeClaimedTasks(
  payload: Uint8Array,
  meta: PayloadMeta,
  out: Uint16Array,
  claims: Int32Array,
  taskCount: number,
): void {
  try {
    for (;;) {
      const k = Atomics.add(claims, 0, 1);
      if (k >= taskCount) return;
      const [first, end] = taskChunks(k, taskCount, meta.chunkCount);
      if (end <= first) continue;
      const start = first * meta.chunkSize;
      const stop = Math.min(meta.elementCount, end * meta.chunkSize);
      decodeChunks(payload, meta, first, end - first, out.subarray(start, stop));
    }
  } catch (error) {
    Atomics.store(claims, 0, taskCount);
    throw error;
  }
}
