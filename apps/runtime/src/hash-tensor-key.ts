import { computeContentKey, formatContentKeyPrefix } from '@splitzip/store';
import type { DecodeBackend } from './create-cpu-decoder.js';
import { settleUnlessAborted } from './settle-unless-aborted.js';
import { isSettlingBackend } from './settling-backends.js';

/**
 * A tensor's content key (the store's computeContentKey), hashed on one of the backend's threads
 * where it offers that (DecodeBackend.hashContentKey: large tensors, once a thread is ready), here
 * otherwise or when the thread fails: checking a whole model's raw bytes against a cache (copied to
 * another host, or built before file stamps) held the loading thread ~0.8 ms a MiB, one tensor at a
 * time. Throws the store's INVALID_ARGUMENT when the bytes cannot be this tensor. `cpuMs`: the time
 * spent hashing, on whichever thread did. `bytes` must not change until this settles.
 */
export async function hashTensorKey(backend: DecodeBackend, bytes: Uint8Array, shape: readonly number[], dtype: string, signal?: AbortSignal, name = 'tensor'): Promise<{ key: string; cpuMs: number }> {
  const prefix = formatContentKeyPrefix(shape, dtype, bytes.byteLength);
  const onThread = backend.hashContentKey?.(bytes, prefix);
  if (onThread !== undefined) {
    // A custom backend's hash that never settles is not waited for once `signal` fires (ABORTED):
    // it held an aborted load for good. The runtime's own always settle.
    let abandoned = false;
    const raced = settleUnlessAborted(onThread, isSettlingBackend(backend) ? undefined : signal, name, () => {
      abandoned = true;
    });
    try {
      const { key, busyMs } = await raced;
      return { key, cpuMs: busyMs };
    } catch (error) {
      if (abandoned) throw error;
      // A thread that died or refused: the same hash here (it is deterministic).
    }
  }
  const startMs = performance.now();
  const key = computeContentKey(bytes, shape, dtype);
  return { key, cpuMs: performance.now() - startMs };
}
