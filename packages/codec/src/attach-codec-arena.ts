import { argumentTypeError } from './argument-type-error.js';
import { isSharedArrayBuffer } from './is-shared-array-buffer.js';
import { registerArenaKernels } from './backend.js';
import { createShareLock } from './arena-share-lock.js';
import { MAX_ARENA_THREADS, type CodecArenaShare } from './create-codec-arena.js';
import { SplitZipError } from './errors.js';
import { WASM_SCRATCH_BYTES, attachWasmKernels } from './wasm/wasm-kernels.js';

/** A shared arena as seen from an attached thread. */
export interface AttachedCodecArena {
  /**
   * The arena's memory in this thread: make views of it (at the offsets the owner hands out) and
   * encode/decode them in place. Use this buffer, not the one posted: only views of it are
   * recognised as arena-resident here.
   */
  readonly buffer: SharedArrayBuffer;
  /** True when encode/decode work on views of `buffer` in place (WebAssembly SIMD available). */
  readonly zeroCopy: boolean;
}

/**
 * Attaches this thread (a worker) to a shared codec arena made elsewhere with `threads`: from now
 * on this thread's encode/decode of views of `buffer` run in place, with the scratch area the
 * owner reserved for `share`. Each share is for one thread: a call of this thread's that finds
 * another thread inside a call on the same share's scratch area throws INVALID_ARGUMENT instead of
 * running, and the owner's `arena.share(i)` retires attachments made from earlier shares of i (for
 * a thread that replaces one that exited).
 */
export function attachCodecArena(share: CodecArenaShare): AttachedCodecArena {
  const memory = share?.memory ?? null;
  if (memory === null) {
    if (!isSharedArrayBuffer(share?.buffer)) {
      throw argumentTypeError('share.buffer', 'a SharedArrayBuffer', share?.buffer);
    }
    return { buffer: share.buffer, zeroCopy: false };
  }
  const buffer: unknown = memory instanceof WebAssembly.Memory ? memory.buffer : undefined;
  if (!isSharedArrayBuffer(buffer)) {
    throw argumentTypeError('share.memory', 'a shared WebAssembly.Memory', memory);
  }
  const scratchBase = share.scratchBase;
  const index = scratchBase / WASM_SCRATCH_BYTES - 1;
  if (!Number.isInteger(index) || index < 0 || index >= MAX_ARENA_THREADS || scratchBase + WASM_SCRATCH_BYTES > buffer.byteLength) {
    throw new SplitZipError('INVALID_ARGUMENT', 'share.scratchBase is not a scratch area of this memory', {
      scratchBase,
      memoryBytes: buffer.byteLength,
    });
  }
  // A share made by an older version has no generation: its owner never renews shares.
  const generation = share.generation ?? 0;
  if (!Number.isInteger(generation) || generation < 0) {
    throw new SplitZipError('INVALID_ARGUMENT', 'share.generation must be a non-negative integer', { generation });
  }
  const lock = createShareLock(new Int32Array(buffer, 0, WASM_SCRATCH_BYTES / 4), index, generation);
  const kernels = attachWasmKernels(memory as WebAssembly.Memory, scratchBase, lock);
  if (kernels === null) return { buffer, zeroCopy: false };
  // Every thread's scratch area is reserved (at least this thread's, for a share without the field).
  const reserved = share.reservedBytes;
  const own = scratchBase + WASM_SCRATCH_BYTES;
  registerArenaKernels(buffer, kernels, Number.isInteger(reserved) && reserved! > own && reserved! <= buffer.byteLength ? reserved! : own);
  return { buffer, zeroCopy: true };
}
