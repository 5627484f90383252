import type { CodecArena } from '@splitzip/codec';
import type { ChecksumOffload } from './checksum-offload.js';
import { createWorkerDecoder } from './create-worker-decoder.js';
import { KernelsError } from './errors.js';

/**
 * One worker thread (the worker decoder's, started on first use, unref'd while idle) that checks
 * checksums of payloads in shared memory: in place when they are views of `arena` (a shared codec
 * arena; the worker attaches its share 0), through its kernel scratch for other shared memory.
 * Ordinary arrays stay with the calling thread (a worker cannot read them).
 */
export function createChecksumWorker(options: { arena?: CodecArena; workerUrl?: URL | string } = {}): ChecksumOffload {
  const { arena, workerUrl } = options;
  if (arena !== undefined && !(arena.buffer instanceof SharedArrayBuffer)) {
    throw new KernelsError('INVALID_ARGUMENT', 'webgpu.arena must be a shared arena: createCodecArena(bytes, { threads: 1 or more })', {});
  }
  const pool = createWorkerDecoder({ threads: 1, ...(arena ? { arena } : {}), ...(workerUrl ? { workerUrl } : {}) });
  return {
    verify(payload) {
      if (!(payload.buffer instanceof SharedArrayBuffer)) return null;
      return pool.verifyChecksum(payload);
    },
    dispose() {
      return pool.dispose();
    },
  };
}
