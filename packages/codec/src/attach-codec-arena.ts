import { isSharedArrayBuffer } from './is-shared-array-buffer.js';
import { registerArenaKernels } from './backend.js';
import type { CodecArenaShare } from './create-codec-arena.js';
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
 * owner reserved for `share`. A thread attaches each share once; two threads must never attach the
 * same share (their kernels would share a scratch area).
 */
export function attachCodecArena(share: CodecArenaShare): AttachedCodecArena {
  const memory = share?.memory ?? null;
  if (memory === null) {
    if (!isSharedArrayBuffer(share?.buffer)) {
      throw new SplitZipError('INVALID_ARGUMENT', 'share.buffer must be a SharedArrayBuffer', {});
    }
    return { buffer: share.buffer, zeroCopy: false };
  }
  const buffer: unknown = memory instanceof WebAssembly.Memory ? memory.buffer : undefined;
  if (!isSharedArrayBuffer(buffer)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'share.memory must be a shared WebAssembly.Memory', {});
  }
  const scratchBase = share.scratchBase;
  if (!Number.isInteger(scratchBase) || scratchBase <= 0 || scratchBase % WASM_SCRATCH_BYTES !== 0 || scratchBase + WASM_SCRATCH_BYTES > buffer.byteLength) {
    throw new SplitZipError('INVALID_ARGUMENT', 'share.scratchBase is not a scratch area of this memory', {
      scratchBase,
      memoryBytes: buffer.byteLength,
    });
  }
  const kernels = attachWasmKernels(memory as WebAssembly.Memory, scratchBase);
  if (kernels === null) return { buffer, zeroCopy: false };
  // Every thread's scratch area is reserved (at least this thread's, for a share without the field).
  const reserved = share.reservedBytes;
  const own = scratchBase + WASM_SCRATCH_BYTES;
  registerArenaKernels(buffer, kernels, Number.isInteger(reserved) && reserved! > own && reserved! <= buffer.byteLength ? reserved! : own);
  return { buffer, zeroCopy: true };
}
