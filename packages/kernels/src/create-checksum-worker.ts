import { availableParallelism } from 'node:os';
import type { CodecArena } from '@splitzip/codec';
import type { ChecksumOffload } from './checksum-offload.js';
import { MAX_CHECKSUM_THREADS } from './create-webgpu-decoder.js';
import { createWorkerDecoder } from './create-worker-decoder.js';
import { kernelsArgumentTypeError } from './check-options.js';

/**
 * Checksum threads by default: a format-v3 payload's segments are hashed on this many workers at
 * once (the calling thread meanwhile fills the upload buffers, hence one core left to it). Four
 * hash ~100 MB in a few ms; more mostly take memory bandwidth from the upload's copy.
 */
export function defaultChecksumThreads(): number {
  return Math.min(4, Math.max(1, availableParallelism() - 1));
}

/**
 * Worker threads (the worker decoder's pool, started on first use, unref'd while idle) that check
 * checksums of payloads in shared memory: in place when they are views of `arena` (a shared codec
 * arena; the workers attach its shares 0..threads-1), through their kernel scratch for other
 * shared memory. A format-v3 payload's segment digests are split across all `threads` workers
 * and combined on the calling thread; older versions are hashed by one worker. Ordinary arrays
 * stay with the calling thread (a worker cannot read them).
 *
 * `threads`: default defaultChecksumThreads(), lowered to the arena's share count when an arena
 * is given; an explicit count above it is INVALID_ARGUMENT.
 */
export function createChecksumWorker(options: { arena?: CodecArena; threads?: number; workerUrl?: URL | string } = {}): ChecksumOffload {
  const { arena, workerUrl } = options;
  if (arena !== undefined && !(arena.buffer instanceof SharedArrayBuffer)) {
    throw kernelsArgumentTypeError('webgpu.arena', 'a shared arena: createCodecArena(bytes, { threads: 1 or more })', arena);
  }
  const threads = options.threads ?? Math.max(1, Math.min(defaultChecksumThreads(), arena?.threads ?? Infinity));
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_CHECKSUM_THREADS) {
    throw kernelsArgumentTypeError('webgpu.checksumThreads', `an integer in 1..${MAX_CHECKSUM_THREADS}`, threads, { checksumThreads: threads });
  }
  const pool = createWorkerDecoder({ threads, ...(arena ? { arena } : {}), ...(workerUrl ? { workerUrl } : {}) });
  return {
    verify(payload, gate) {
      if (!(payload.buffer instanceof SharedArrayBuffer)) return null;
      return pool.verifyChecksum(payload, gate ? { gate } : undefined);
    },
    dispose() {
      return pool.dispose();
    },
  };
}
