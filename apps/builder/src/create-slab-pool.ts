// The build's working memory: one shared buffer of fixed size (the memory budget), from which
// every raw tensor and every payload buffer is carved. The workers receive it once and then read
// and write views of it by offset: no buffer is transferred, copied or allocated per tensor, and
// none is ever left to a garbage collector (a SharedArrayBuffer a worker has seen is freed only
// when that worker's isolate collects it: measured, a pool that dropped such buffers let RSS grow
// by hundreds of MB). Pages are committed on first touch, so RSS grows to at most the slab's size.
// The buffer is a codec arena (a fixed-size WebAssembly memory, shared with the workers) wherever
// one can be made, so that the codec's kernels encode tensors and check payloads in place: on a
// plain SharedArrayBuffer they copy every block in and out of their own memory (V8 copies shared
// memory with a relaxed memmove: ~0.2 CPU-s per GB of BF16 built, measured).
import { attachCodecArena, createCodecArena, type CodecArenaShare } from '@splitzip/codec';
import { mallocUsesHugePages } from '@splitzip/codec/internal';
import { BuilderError } from './errors.js';

export interface SlabPool {
  /**
   * The memory every view is of: a SharedArrayBuffer when the slab is shared with worker threads
   * (`threads` > 0), else private. Workers build their views on what `attachSlab` returns them.
   */
  readonly buffer: ArrayBufferLike;
  /** Where the slab starts in `buffer` (a codec arena keeps its kernels' scratch areas before it). */
  readonly byteOffset: number;
  readonly capBytes: number;
  /** True when the codec's kernels work on the slab's views in place (a codec arena). */
  readonly zeroCopy: boolean;
  /**
   * What worker thread `index` (0 ≤ index < threads) attaches with `attachSlab`: the memory and,
   * in a codec arena, the kernel scratch area reserved for that thread alone.
   */
  share(index: number): CodecArenaShare;
  /** Bytes allocated now (aligned sizes). */
  readonly usedBytes: number;
  /**
   * Views of exactly these sizes (each at a SLAB_ALIGN_BYTES boundary), all or nothing: null when
   * they do not fit now. Always succeeds on an empty slab when their aligned sum fits the cap.
   */
  tryAcquire(sizes: readonly number[]): Uint8Array[] | null;
  /**
   * Frees the allocation of a view tryAcquire handed out (that very object: a subarray or a view
   * released before is ignored, so a second release never frees a later allocation at the same place).
   */
  release(view: Uint8Array): void;
  /** Resolves at the next release (or at once when one happened since the last call). */
  changed(): Promise<void>;
}

/** Allocations are aligned like payload sections (and BF16 views need 2 bytes at least). */
export const SLAB_ALIGN_BYTES = 256;

const alignUp = (bytes: number): number => Math.ceil(bytes / SLAB_ALIGN_BYTES) * SLAB_ALIGN_BYTES;

/** The slab space `sizes` take together (what tryAcquire needs free, fragmentation aside). */
export function slabBytesOf(sizes: readonly number[]): number {
  return sizes.reduce((sum, size) => sum + alignUp(Math.max(size, 1)), 0);
}

export interface SlabOptions {
  /** Worker threads that will attach to the slab (0: only this thread uses it, unshared). */
  threads?: number | undefined;
  /**
   * A codec arena (default: unless glibc's malloc is set to use huge pages, see
   * mallocUsesHugePages), else a plain buffer.
   */
  arena?: boolean | undefined;
}

/**
 * The slab's memory for this thread: a codec arena of `cap` bytes (shared with `threads` other
 * threads when there are any), else a plain (Shared)ArrayBuffer: where the arena is not wanted
 * or cannot be made (beyond wasm32's 4 GiB, no WebAssembly SIMD, the address space refused)
 * nothing else changes.
 */
function allocateSlabMemory(
  cap: number,
  threads: number,
  arena: boolean,
): { buffer: ArrayBufferLike; base: number; zeroCopy: boolean; share: (index: number) => CodecArenaShare } {
  if (arena) {
    try {
      const made = createCodecArena(cap, { threads });
      const view = made.allocate(cap);
      if (made.zeroCopy) return { buffer: made.buffer, base: view.byteOffset, zeroCopy: true, share: (index) => made.share(index) };
    } catch {
      // Too large for a wasm32 memory, or the reservation failed: a plain buffer below.
    }
  }
  let buffer: ArrayBufferLike;
  try {
    buffer = threads > 0 ? new SharedArrayBuffer(cap) : new ArrayBuffer(cap);
  } catch (error) {
    // A bare "RangeError: Array buffer allocation failed" named nothing a user could change.
    throw new BuilderError(
      'OUT_OF_MEMORY',
      `cannot reserve the build's ${cap}-byte slab (raw tensors and payloads in flight): ${(error as Error).message}; ` +
        'allow the process more memory (ulimit -v, the container), or, calling buildCache, ask for a smaller slab (maxInFlightBytes; it is sized from the largest tensor, not the workers)',
      { slabBytes: cap },
      { cause: error },
    );
  }
  const share = (index: number): CodecArenaShare => {
    if (!(buffer instanceof SharedArrayBuffer) || !Number.isInteger(index) || index < 0 || index >= threads) {
      throw new RangeError(`share index ${index} is not one of the slab's ${threads} threads`);
    }
    return { buffer, memory: null, scratchBase: 0 };
  };
  return { buffer, base: 0, zeroCopy: false, share };
}

/**
 * In a worker thread: attaches to the slab share posted to it (once per thread) and returns the
 * buffer to make views of, at the offsets the owner hands out (views of it are in place for the codec).
 */
export function attachSlab(share: CodecArenaShare): SharedArrayBuffer {
  return attachCodecArena(share).buffer;
}

export function createSlabPool(capBytes: number, options: SlabOptions = {}): SlabPool {
  const cap = alignUp(capBytes);
  // Where malloc gives huge pages (codec.mallocUsesHugePages), a plain slab gets them and an arena
  // does not: measured on the 1.16 GB model, tmpfs, --jobs 2: 41 k first-touch faults and 2.08 s
  // with a plain slab, 49 k and 2.30 s with the arena, whose in-place encoding saves less (~0.15
  // CPU-s) than the faults cost here.
  const memory = allocateSlabMemory(cap, options.threads ?? 0, options.arena ?? !mallocUsesHugePages(process.env.GLIBC_TUNABLES));
  const { buffer, base } = memory;
  // Free ranges, ascending offsets, never adjacent (merged on release); first fit.
  const free: { offset: number; size: number }[] = [{ offset: 0, size: cap }];
  // offset -> [aligned size, the view handed out]
  const allocated = new Map<number, [number, Uint8Array | null]>();
  let usedBytes = 0;
  let wake: (() => void) | null = null;
  let pending = false;

  const take = (size: number): number | null => {
    const at = free.findIndex((range) => range.size >= size);
    if (at === -1) return null;
    const range = free[at]!;
    const offset = range.offset;
    if (range.size === size) free.splice(at, 1);
    else {
      range.offset += size;
      range.size -= size;
    }
    allocated.set(offset, [size, null]);
    usedBytes += size;
    return offset;
  };

  const give = (offset: number): void => {
    const size = allocated.get(offset)?.[0];
    if (size === undefined) return;
    allocated.delete(offset);
    usedBytes -= size;
    let at = free.findIndex((range) => range.offset > offset);
    if (at === -1) at = free.length;
    free.splice(at, 0, { offset, size });
    // Merge with the next range, then with the previous one.
    const next = free[at + 1];
    if (next && offset + size === next.offset) {
      free[at]!.size += next.size;
      free.splice(at + 1, 1);
    }
    const previous = free[at - 1];
    if (previous && previous.offset + previous.size === offset) {
      previous.size += free[at]!.size;
      free.splice(at, 1);
    }
  };

  return {
    buffer,
    byteOffset: base,
    capBytes: cap,
    zeroCopy: memory.zeroCopy,
    share: memory.share,
    get usedBytes() {
      return usedBytes;
    },
    tryAcquire(sizes) {
      const offsets: number[] = [];
      for (const size of sizes) {
        const offset = take(alignUp(Math.max(size, 1)));
        if (offset === null) {
          for (const done of offsets) give(done);
          return null;
        }
        offsets.push(offset);
      }
      return offsets.map((offset, i) => {
        const view = new Uint8Array(buffer, base + offset, sizes[i]!);
        allocated.get(offset)![1] = view;
        return view;
      });
    },
    release(view) {
      const offset = view.byteOffset - base;
      if (allocated.get(offset)?.[1] !== view) return;
      give(offset);
      if (wake) {
        const resolve = wake;
        wake = null;
        resolve();
      } else pending = true;
    },
    changed() {
      if (pending) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const previous = wake;
        wake = () => {
          previous?.();
          resolve();
        };
      });
    },
  };
}
