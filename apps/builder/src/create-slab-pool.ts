// The build's working memory: one SharedArrayBuffer of fixed size (the memory budget), from which
// every raw tensor and every payload buffer is carved. The workers receive it once and then read
// and write views of it by offset: no buffer is transferred, copied or allocated per tensor, and
// none is ever left to a garbage collector (a SharedArrayBuffer a worker has seen is freed only
// when that worker's isolate collects it: measured, a pool that dropped such buffers let RSS grow
// by hundreds of MB). Pages are committed on first touch, so RSS grows to at most the slab's size.

export interface SlabPool {
  /** The memory (workers build their views on it). */
  readonly buffer: SharedArrayBuffer;
  readonly capBytes: number;
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

export function createSlabPool(capBytes: number): SlabPool {
  const cap = alignUp(capBytes);
  const buffer = new SharedArrayBuffer(cap);
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
    capBytes: cap,
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
        const view = new Uint8Array(buffer, offset, sizes[i]!);
        allocated.get(offset)![1] = view;
        return view;
      });
    },
    release(view) {
      if (allocated.get(view.byteOffset)?.[1] !== view) return;
      give(view.byteOffset);
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
