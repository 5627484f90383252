import { argumentTypeError } from './argument-type-error.js';
import { getCodecBackend, registerArenaKernels } from './backend.js';
import { SplitZipError } from './errors.js';
import { MAX_WASM_MEMORY_BYTES, WASM_SCRATCH_BYTES, createWasmKernels } from './wasm/wasm-kernels.js';
import { readOptions } from './check-options.js';
import { renewShare } from './arena-share-lock.js';
import { describeValue } from './describe-value.js';
import { optionNamesOf } from './find-unknown-option.js';

/**
 * What another thread needs to work in a shared arena (`arena.share(i)`, posted with postMessage):
 * the memory and a scratch area reserved for that thread. Pass it to `attachCodecArena` there.
 */
export interface CodecArenaShare {
  /** The arena's memory: its `buffer` is a SharedArrayBuffer. */
  readonly buffer: SharedArrayBuffer;
  /**
   * The WebAssembly memory behind `buffer` (a `WebAssembly.Memory`, typed as `CodecArenaMemory`);
   * null where the arena is a plain SharedArrayBuffer (no SIMD).
   */
  readonly memory: CodecArenaMemory | null;
  /** Start of the scratch area the attaching thread's kernels use (reserved for it alone). */
  readonly scratchBase: number;
  /**
   * Bytes [0, reservedBytes) of the memory are the scratch areas of all the arena's threads: no
   * view passed to encode/decode may touch them (absent in shares made by older versions).
   */
  readonly reservedBytes?: number;
  /**
   * How many times the owner has handed this share out (`arena.share(i)`): an attachment made from
   * an earlier one is retired (absent in shares made by older versions).
   */
  readonly generation?: number;
}

/**
 * The members of a `WebAssembly.Memory` a share's `memory` is typed with, so these declarations
 * need no DOM lib (Node projects compile against ES2022 + @types/node); the value is always a real
 * `WebAssembly.Memory`, which `attachCodecArena` checks.
 */
export interface CodecArenaMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  grow(delta: number): number;
}

export interface CodecArenaOptions {
  /**
   * Back the arena with shared memory and reserve scratch areas for this many other threads, each
   * of which attaches with `attachCodecArena(arena.share(i))` and then encodes and decodes views of
   * the arena in place, as the owner does. Default 0: a private arena.
   */
  threads?: number | undefined;
}

const ARENA_OPTION_NAMES = optionNamesOf<CodecArenaOptions>({ threads: true });

/** Threads one shared arena can reserve scratch areas for. */
export const MAX_ARENA_THREADS = 64;

/**
 * Memory the codec's WebAssembly kernels can work in place: payloads and tensors allocated here
 * are encoded and decoded without being copied through the kernels' scratch buffers. A bump
 * allocator; `reset()` frees everything at once.
 */
export interface CodecArena {
  /** Usable bytes (as asked for, at least). */
  readonly byteLength: number;
  /** Bytes handed out since creation or the last reset (allocations are rounded to 256 bytes). */
  readonly usedBytes: number;
  /** True when encode/decode work on this arena's views in place (WebAssembly SIMD available and active). */
  readonly zeroCopy: boolean;
  /** A view of `byteLength` bytes (contents unspecified: zero when new, stale after a reset), 256-byte aligned. */
  allocate(byteLength: number): Uint8Array;
  /** A view of `count` 16-bit values (contents unspecified), 256-byte aligned. */
  allocateValues(count: number): Uint16Array;
  /** Frees every allocation; views handed out before stay valid but will alias new ones. */
  reset(): void;
  /**
   * Frees `view`, a view this arena's `allocate`/`allocateValues` returned, if it is the most
   * recent allocation still held (stack order: a borrower that takes room at the top gives it back
   * without a `reset`). Returns false, freeing nothing, when something was allocated after it,
   * when it was freed already, or when it is only part of an allocation (same start and length as
   * the allocation required).
   */
  release(view: ArrayBufferView): boolean;
  /** The arena's memory (a SharedArrayBuffer when created with `threads`). */
  readonly buffer: ArrayBufferLike;
  /** Other threads this arena reserved scratch areas for (0: a private arena). */
  readonly threads: number;
  /**
   * For thread `index` (0 ≤ index < threads): what it passes to `attachCodecArena`. Each call hands
   * share `index` out afresh and retires the attachments made from earlier ones (their calls throw
   * INVALID_ARGUMENT): call it for a thread that replaces one only after that one exited.
   */
  share(index: number): CodecArenaShare;
  /**
   * `share(index)` for `holder` (an object standing for one thread: a pool's record of a worker),
   * or null when share `index` was last handed out to this very holder (its attachment is still
   * the current one). For pools that use an arena in turn with other pools (two decoders over one
   * staging arena): a worker attaches again only when another took its share since.
   */
  shareFor(index: number, holder: object): CodecArenaShare | null;
}

/** Allocations are aligned like payload sections, so a payload placed here keeps its alignment. */
const ARENA_ALIGN_BYTES = 256;
/** Wasm32 memory is at most 4 GiB; the kernels keep their scratch area at its start. */
export const MAX_ARENA_BYTES = MAX_WASM_MEMORY_BYTES - WASM_SCRATCH_BYTES;

/**
 * Creates an arena of `byteLength` bytes inside a WebAssembly memory of fixed size (it never
 * grows, so its views are never detached). Where WebAssembly SIMD is unavailable the arena is a
 * plain ArrayBuffer and encode/decode copy as usual. Memory is reserved up front (virtual; pages
 * are committed on first touch).
 */
export function createCodecArena(byteLength: number, options?: CodecArenaOptions | null): CodecArena {
  // Only undefined means the default: a null thread count is refused like a null chunkSize.
  const given = readOptions(options, 'options', ARENA_OPTION_NAMES)?.threads;
  const threads = given === undefined ? 0 : given;
  if (typeof threads !== 'number' || !Number.isInteger(threads) || threads < 0 || threads > MAX_ARENA_THREADS) {
    throw new SplitZipError('INVALID_ARGUMENT', `arena threads must be an integer in 0..${MAX_ARENA_THREADS}, got ${describeValue(threads)}`, {
      threads,
      argument: 'options.threads',
      got: describeValue(threads),
    });
  }
  const shared = threads > 0;
  // Shared memory exists only where SharedArrayBuffer does and, on the web, on cross-origin-isolated
  // pages: elsewhere the wasm path could still make a shared memory that no postMessage can carry.
  if (shared && (typeof SharedArrayBuffer === 'undefined' || (globalThis as { crossOriginIsolated?: unknown }).crossOriginIsolated === false)) {
    throw new SplitZipError('INVALID_ARGUMENT', 'a shared arena (threads > 0) needs SharedArrayBuffer, which a web page has only when cross-origin isolated (COOP and COEP headers)', {
      threads,
    });
  }
  // Each attached thread's kernels get a scratch area after the owner's, before the arena space.
  const threadScratchBytes = threads * WASM_SCRATCH_BYTES;
  const maxBytes = MAX_ARENA_BYTES - threadScratchBytes;
  if (!Number.isInteger(byteLength) || byteLength < 0 || byteLength > maxBytes) {
    throw new SplitZipError('INVALID_ARGUMENT', `arena byteLength must be an integer in 0..${maxBytes}, got ${describeValue(byteLength)}`, {
      byteLength,
      threads,
      argument: 'byteLength',
      got: describeValue(byteLength),
    });
  }
  let buffer: ArrayBufferLike;
  let base = 0;
  let zeroCopy = false;
  let memory: WebAssembly.Memory | null = null;
  let shareWords: Int32Array | null = null;
  let wasm: ReturnType<typeof createWasmKernels>;
  try {
    wasm = createWasmKernels(threadScratchBytes + byteLength, { shared });
  } catch (error) {
    throw new SplitZipError('INVALID_ARGUMENT', `could not reserve a ${byteLength}-byte arena`, {
      byteLength,
      cause: String(error),
    });
  }
  if (wasm !== null) {
    memory = wasm.memory;
    buffer = wasm.memory.buffer;
    base = WASM_SCRATCH_BYTES + threadScratchBytes;
    registerArenaKernels(buffer, wasm.kernels, base);
    zeroCopy = true;
    if (shared) shareWords = new Int32Array(buffer, 0, WASM_SCRATCH_BYTES / 4);
  } else {
    buffer = shared ? new SharedArrayBuffer(byteLength) : new ArrayBuffer(byteLength);
  }
  const end = base + byteLength;
  let next = base;
  // Start offsets and byte lengths of the allocations still held, in order: release frees only a
  // view that is exactly the last one (a part of it would hand out bytes its owner still uses).
  const heldAt: number[] = [];
  const heldBytes: number[] = [];
  // Who each share was last handed to through shareFor (undefined after a plain share()).
  const holders: (WeakRef<object> | undefined)[] = [];

  function take(bytes: number, what: string): number {
    if (!Number.isInteger(bytes) || bytes < 0) {
      throw new SplitZipError('INVALID_ARGUMENT', `${what} must be a non-negative integer, got ${describeValue(bytes)}`, {
        [what]: bytes,
        argument: what,
        got: describeValue(bytes),
      });
    }
    if (bytes > end - next) {
      throw new SplitZipError('OUTPUT_TOO_SMALL', `arena has ${end - next} bytes left, ${bytes} asked for`, {
        freeBytes: end - next,
        needed: bytes,
      });
    }
    const at = next;
    next = Math.min(end, Math.ceil((next + bytes) / ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES);
    // A zero-byte allocation holds nothing, so it never blocks releasing the one below it.
    if (bytes > 0) {
      heldAt.push(at);
      heldBytes.push(bytes);
    }
    return at;
  }

  return {
    byteLength,
    get usedBytes() {
      return next - base;
    },
    get zeroCopy() {
      return zeroCopy && getCodecBackend() === 'wasm-simd';
    },
    allocate(bytes: number): Uint8Array {
      return new Uint8Array(buffer, take(bytes, 'byteLength'), bytes);
    },
    allocateValues(count: number): Uint16Array {
      if (!Number.isInteger(count) || count < 0 || count > MAX_ARENA_BYTES / 2) {
        throw new SplitZipError('INVALID_ARGUMENT', `count must be an integer in 0..${MAX_ARENA_BYTES / 2}, got ${describeValue(count)}`, {
          count,
          argument: 'count',
          got: describeValue(count),
        });
      }
      return new Uint16Array(buffer, take(2 * count, 'byteLength'), count);
    },
    reset(): void {
      next = base;
      heldAt.length = 0;
      heldBytes.length = 0;
    },
    release(view: ArrayBufferView): boolean {
      if (!ArrayBuffer.isView(view) || view.buffer !== buffer) {
        throw argumentTypeError('view', 'a view of this arena (from allocate or allocateValues)', view);
      }
      if (view.byteLength === 0) return view.byteOffset === next;
      const last = heldAt.length - 1;
      if (last < 0 || view.byteOffset !== heldAt[last] || view.byteLength !== heldBytes[last]) return false;
      next = heldAt.pop()!;
      heldBytes.pop();
      return true;
    },
    buffer,
    threads,
    share(index: number): CodecArenaShare {
      checkShareIndex(index);
      holders[index] = undefined;
      return makeShare(index);
    },
    shareFor(index: number, holder: object): CodecArenaShare | null {
      checkShareIndex(index);
      if (typeof holder !== 'object' || holder === null) {
        throw new SplitZipError('INVALID_ARGUMENT', `shareFor's holder must be an object, got ${describeValue(holder)}`, { argument: 'holder' });
      }
      if (holders[index]?.deref() === holder) return null;
      // Weak: a holder whose thread is gone is not kept alive by the arena.
      holders[index] = new WeakRef(holder);
      return makeShare(index);
    },
  };

  function checkShareIndex(index: number): void {
    if (threads === 0) {
      throw new SplitZipError('INVALID_ARGUMENT', 'this arena is private: share() needs an arena created with { threads }', { index, threads });
    }
    if (!Number.isInteger(index) || index < 0 || index >= threads) {
      throw new SplitZipError('INVALID_ARGUMENT', `share index must be an integer in 0..${threads - 1} (the arena's threads), got ${describeValue(index)}`, {
        index,
        threads,
        argument: 'index',
        got: describeValue(index),
      });
    }
  }

  function makeShare(index: number): CodecArenaShare {
    if (shareWords === null) return { buffer: buffer as SharedArrayBuffer, memory, scratchBase: 0, reservedBytes: base };
    return {
      buffer: buffer as SharedArrayBuffer,
      memory,
      scratchBase: WASM_SCRATCH_BYTES * (1 + index),
      reservedBytes: base,
      generation: renewShare(shareWords, index),
    };
  }
}
