import { createCodecArena, type CodecArena } from '@splitzip/codec';
import { describeValue, mallocUsesHugePages } from '@splitzip/codec/internal';
import { argumentError, checkBooleanArgument, checkOptionsArgument, checkSignalArgument, optionNames } from './check-load-arguments.js';
import { abortedError, RuntimeError } from './errors.js';

/** Slots start at byte offsets that are multiples of this, like the payload's own sections. */
export const STAGING_ALIGN_BYTES = 256;

/**
 * Largest single backing buffer the pool allocates for all its slots together. Above it each slot
 * gets its own buffer (Node caps one ArrayBuffer near 4 GiB, and one huge allocation is more likely
 * to fail than a few smaller ones).
 */
export const MAX_POOL_ARENA_BYTES = 1024 * 1024 * 1024;

/** Hard cap on slot size: one compressed payload of a 2^32 − 1 element tensor is < 6.1 GiB, but a
 * Node ArrayBuffer cannot exceed 2^32 bytes on this platform, so larger slots cannot exist. */
export const MAX_SLOT_BYTES = 2 ** 32 - STAGING_ALIGN_BYTES;

/** Cap on the number of slots: each in-flight payload needs one; more than this is a bug, not a plan. */
export const MAX_SLOT_COUNT = 1024;

/**
 * Cap on a pool's slots together (slotCount × slotBytes, after alignment): 64 GiB, sixteen of the
 * largest slot (MAX_SLOT_BYTES). A pool allocates all of it at creation and holds it for its life;
 * it stages the compressed payloads in flight, and a load keeps at most MAX_LOAD_CONCURRENCY (64)
 * of them, each a fraction of its tensor. Each slot alone is capped by what one buffer can be
 * (MAX_SLOT_BYTES) and the count by MAX_SLOT_COUNT, but not their product: 1,024 slots of 2 GiB
 * (2 TiB) were accepted, overcommitted memory that the first loads then fault in until the host
 * runs out. The pool a load makes for itself stays within it with fewer slots (as maxStagingBytes does).
 */
export const MAX_STAGING_POOL_BYTES = 16 * 2 ** 32;

/**
 * Longest `slotWaitMs`: Node's timer limit (a longer delay fires at once, with a warning). Leave
 * the option out to wait with no deadline.
 */
export const MAX_SLOT_WAIT_MS = 2 ** 31 - 1;

/**
 * `slotWaitMs` (createStagingPool, cache.createStagingPool, acquire): undefined (wait until a slot
 * comes), or a number of milliseconds in (0, MAX_SLOT_WAIT_MS].
 */
export function checkSlotWaitArgument(value: unknown): asserts value is number | undefined {
  if (value !== undefined && (typeof value !== 'number' || !(value > 0) || value > MAX_SLOT_WAIT_MS)) {
    throw argumentError('slotWaitMs', `a number of milliseconds > 0 and <= ${MAX_SLOT_WAIT_MS} (MAX_SLOT_WAIT_MS, Node's timer limit), or left out to wait with no deadline`, value);
  }
}

/**
 * A pool's slot count: a whole number in 1..MAX_SLOT_COUNT (createStagingPool and
 * cache.createStagingPool: one rule, one message).
 */
export function checkSlotCountArgument(slotCount: unknown): asserts slotCount is number {
  if (!Number.isSafeInteger(slotCount) || (slotCount as number) < 1 || (slotCount as number) > MAX_SLOT_COUNT) {
    throw argumentError('slotCount', `a whole number in 1..${MAX_SLOT_COUNT} (MAX_SLOT_COUNT)`, slotCount);
  }
}

/** The most slots of `slotBytes` (rounded up to STAGING_ALIGN_BYTES, at least one unit) a pool may have: MAX_STAGING_POOL_BYTES. */
export function maxSlotCountFor(slotBytes: number): number {
  const aligned = Math.max(STAGING_ALIGN_BYTES, alignUp(slotBytes, STAGING_ALIGN_BYTES));
  return Math.min(MAX_SLOT_COUNT, Math.floor(MAX_STAGING_POOL_BYTES / aligned));
}

/** One reusable staging buffer. Its identity (`id`, `bytes`) never changes for the pool's life. */
export interface StagingSlot {
  readonly id: number;
  /** `slotBytes` long; `bytes.byteOffset` is a multiple of {@link STAGING_ALIGN_BYTES}. */
  readonly bytes: Uint8Array;
}

export interface StagingPoolStats {
  readonly slotCount: number;
  readonly slotBytes: number;
  /** Buffers allocated since creation: the arena (or one per slot). Never grows after creation. */
  readonly allocations: number;
  readonly acquires: number;
  /** Acquires that had to wait for a release (waits that ended in an abort or a close are not acquires). */
  readonly waits: number;
  readonly inUse: number;
  readonly peakInUse: number;
  /**
   * Of `inUse`, slots a load gave up while a read into them may still write (an abort left behind
   * a custom reader's read that ignores the signal): each comes back once that read settles. A
   * load waiting for a slot while these are out waits on that reader.
   */
  readonly quarantinedSlots: number;
}

export interface StagingPool {
  readonly slotCount: number;
  readonly slotBytes: number;
  /**
   * The codec arena holding every slot, when there is one: the codec's kernels then read the
   * payloads in place (no copy into WebAssembly memory), and decode threads attached to it too.
   */
  readonly arena: CodecArena | undefined;
  /** Free slots right now. */
  readonly available: number;
  /**
   * Takes a free slot, waiting (FIFO) for a release when none is free. With `bytes` (how much of
   * the slot the caller will use) the pool picks among the free slots as in `tryAcquire`. With
   * `slotWaitMs` (default: the pool's), a wait that lasts that long rejects `POOL_WAIT_TIMEOUT`;
   * an abort of `signal` first rejects `ABORTED`, as without a deadline.
   */
  acquire(options?: { signal?: AbortSignal; bytes?: number; slotWaitMs?: number }): Promise<StagingSlot>;
  /**
   * Takes a free slot now, or returns undefined. Without `bytes`: the most recently released slot.
   * With `bytes`: the free slot whose bytes already used (the most any acquire asked of it) cover
   * `bytes` most tightly, the most recent on a tie; if none covers it, the one used most. A large
   * payload then lands where large payloads were staged before, on memory already touched,
   * instead of on the untouched tail of a slot that only ever held small ones.
   */
  tryAcquire(bytes?: number): StagingSlot | undefined;
  /** Gives a slot back. Throws `SLOT_NOT_OWNED` for a slot that is not out, or not this pool's. */
  release(slot: StagingSlot): void;
  /** Scoped ownership: acquire, run `fn(slot)`, release even if `fn` throws. */
  withSlot<T>(fn: (slot: StagingSlot) => T | Promise<T>, options?: { signal?: AbortSignal; bytes?: number; slotWaitMs?: number }): Promise<T>;
  stats(): StagingPoolStats;
  /** Rejects every waiter with `POOL_CLOSED`; later acquires fail. Slots out stay valid until released. */
  close(): void;
}

export interface StagingPoolOptions {
  /** Bytes per slot: the largest payload the pool must hold (rounded up to the alignment). */
  slotBytes: number;
  /** Number of slots: how many payloads may be staged at once. */
  slotCount: number;
  /** Back the slots with shared memory (for decoding in worker threads). */
  shared?: boolean | undefined;
  /**
   * With `shared`: decode threads that will attach to the pool's codec arena (each gets a kernel
   * scratch area in it). Default 0: shared memory without attached threads.
   */
  threads?: number | undefined;
  /**
   * Carve the slots out of this codec arena (e.g. the one the caller's tensors live in, so that
   * decode reads and writes in place); it must have room for them. Overrides `shared`/`threads`.
   */
  arena?: CodecArena | undefined;
  /**
   * Without `arena`: put the slots in a new codec arena of their own (WebAssembly memory, so the
   * codec's kernels read payloads in place), or in an ordinary (shared) buffer. Default: an arena,
   * unless this process's malloc gives large buffers huge pages (codec `mallocUsesHugePages` of
   * GLIBC_TUNABLES), which WebAssembly memory does not get. Measured 2026-12-04 with
   * `hugetlb=1:mmap_threshold=33554432:arena_max=1`, arena against plain shared buffer, 2
   * alternating runs each: first loads of a fresh process 668-901 against 478-515 ms (1.07 GB
   * model) and 71-86 against 40-45 ms (default model); later loads equal (300-335 against 307-310,
   * 13.4-14.3 against 13.0-15.7 ms). Without the tunable the arena stays: later loads 537-676
   * against 650-709 ms, 15.3-16.4 against 17.3-18.3 ms.
   */
  codecArena?: boolean | undefined;
  /**
   * How long an acquire (a load's, a decode thread's) waits for a slot before it rejects
   * `POOL_WAIT_TIMEOUT` (details: slotCount, inUse, quarantinedSlots, waitedMs); default: no
   * deadline. A slot set aside for a read or decode an aborted load left behind (a custom reader
   * or backend that ignores the signal) comes back only when that settles, which may be never:
   * once every slot is set aside, a wait without a deadline lasts as long.
   */
  slotWaitMs?: number | undefined;
}

function alignUp(value: number, align: number): number {
  return Math.ceil(value / align) * align;
}

/** Every pool slot ever made, with whether it is out now: a released slot used for a read is refused. */
const slotIsOut = new WeakMap<StagingSlot, () => boolean>();

/** Per pool: gives a slot back once a read into it settles, counted meanwhile (releaseStagingSlotWhenSettled). */
const quarantinersOf = new WeakMap<StagingPool, (slot: StagingSlot, settled: Promise<unknown>) => void>();

/**
 * Gives `slot` (out of `pool`) back once `settled` settles: a read the load's abort left behind (a
 * custom reader that ignores the signal) may write into it until then. Meanwhile the pool's stats
 * count it in `quarantinedSlots`. Throws `SLOT_NOT_OWNED` as `release` does.
 */
export function releaseStagingSlotWhenSettled(pool: StagingPool, slot: StagingSlot, settled: Promise<unknown>): void {
  const quarantine = quarantinersOf.get(pool);
  if (quarantine === undefined) {
    // A pool of the caller's own making (not createStagingPool's): released as it is, later.
    const release = () => pool.release(slot);
    // The load has ended: a throwing release of the caller's pool has no one to go to, and
    // unhandled it would end the process (Node's default for unhandled rejections).
    void settled.then(release, release).catch(() => undefined);
    return;
  }
  quarantine(slot, settled);
}

/** Per pool: a promise that settles once its quarantined slots are all back (whenQuarantinedSlotsBack). */
const quarantineEndOf = new WeakMap<StagingPool, () => Promise<void>>();

/**
 * For a pool of createStagingPool's: a promise that resolves once none of its slots is quarantined
 * (at once when none is; a quarantined slot's read or decode that never settles never resolves
 * it). Undefined for a pool of the caller's own making. The slots come back through `release`, so
 * a waiter for a slot may get one first.
 */
export function whenQuarantinedSlotsBack(pool: StagingPool): Promise<void> | undefined {
  return quarantineEndOf.get(pool)?.();
}

/** True for a slot of a pool that is not acquired now (released, or never taken): not the caller's to fill. */
export function isStagingSlotReleased(slot: StagingSlot): boolean {
  const isOut = slotIsOut.get(slot);
  return isOut !== undefined && !isOut();
}

/**
 * A fixed set of reusable, aligned staging slots with explicit ownership. Every buffer is
 * allocated here, once; acquire/release only move slot indices between a free list and callers,
 * so steady-state loading allocates nothing per tensor.
 */
export function createStagingPool(options: StagingPoolOptions): StagingPool {
  if (typeof options !== 'object' || options === null) {
    const got = describeValue(options);
    throw new RuntimeError('INVALID_ARGUMENT', `createStagingPool needs options { slotCount, slotBytes }, got ${got}`, { option: 'options', got });
  }
  checkOptionsArgument(options, optionNames<StagingPoolOptions>({ slotBytes: true, slotCount: true, shared: true, threads: true, arena: true, codecArena: true, slotWaitMs: true }));
  checkBooleanArgument(options.shared, 'shared');
  checkSlotWaitArgument(options.slotWaitMs);
  const poolSlotWaitMs = options.slotWaitMs;
  checkBooleanArgument(options.codecArena, 'codecArena');
  const { slotCount, shared = false } = options;
  checkSlotCountArgument(slotCount);
  if (!Number.isSafeInteger(options.slotBytes) || options.slotBytes < 0 || options.slotBytes > MAX_SLOT_BYTES) {
    throw argumentError('slotBytes', `a whole number of bytes in 0..${MAX_SLOT_BYTES} (MAX_SLOT_BYTES: one buffer)`, options.slotBytes);
  }
  // A zero-byte slot is legal (a cache of empty tensors) but still gets one aligned unit.
  const slotBytes = Math.max(STAGING_ALIGN_BYTES, alignUp(options.slotBytes, STAGING_ALIGN_BYTES));
  const mostSlots = maxSlotCountFor(options.slotBytes);
  if (slotCount > mostSlots) {
    const got = describeValue(slotCount);
    throw new RuntimeError(
      'INVALID_ARGUMENT',
      `slotCount must be at most ${mostSlots} for slots of ${slotBytes} bytes (MAX_STAGING_POOL_BYTES: ${MAX_STAGING_POOL_BYTES} bytes of slots in all), got ${got} (${slotCount * slotBytes} bytes)`,
      { option: 'slotCount', type: 'number', got, slotBytes, totalBytes: slotCount * slotBytes, limit: MAX_STAGING_POOL_BYTES },
    );
  }
  const makeBuffer = (bytes: number): ArrayBufferLike => (shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));

  const slots: StagingSlot[] = [];
  let allocations = 0;
  let arena = options.arena;
  if (arena === undefined && slotBytes * slotCount <= MAX_POOL_ARENA_BYTES && (options.codecArena ?? !mallocUsesHugePages(process.env.GLIBC_TUNABLES))) {
    // One codec arena for all slots (a plain or shared buffer where WebAssembly SIMD is missing).
    const threads = shared ? (options.threads ?? 0) : 0;
    if (!Number.isSafeInteger(threads) || threads < 0 || threads > 64) {
      throw argumentError('threads', 'a whole number in 0..64', threads);
    }
    if (!shared || threads > 0) {
      try {
        arena = createCodecArena(slotBytes * slotCount, { threads });
        allocations = 1;
      } catch {
        arena = undefined; // cannot reserve it as WebAssembly memory: ordinary buffers below
      }
    }
  }
  if (arena !== undefined) {
    if (options.arena !== undefined && slotBytes * slotCount > arena.byteLength - arena.usedBytes) {
      throw new RuntimeError('INVALID_ARGUMENT', `the arena has ${arena.byteLength - arena.usedBytes} bytes free, ${slotCount} slots of ${slotBytes} need ${slotBytes * slotCount}`, {
        slotCount,
        slotBytes,
        freeBytes: arena.byteLength - arena.usedBytes,
      });
    }
    for (let id = 0; id < slotCount; id += 1) slots.push(Object.freeze({ id, bytes: arena.allocate(slotBytes) }));
  } else if (slotBytes * slotCount <= MAX_POOL_ARENA_BYTES) {
    const arena = makeBuffer(slotBytes * slotCount);
    allocations = 1;
    for (let id = 0; id < slotCount; id += 1) {
      slots.push(Object.freeze({ id, bytes: new Uint8Array(arena, id * slotBytes, slotBytes) }));
    }
  } else {
    for (let id = 0; id < slotCount; id += 1) {
      slots.push(Object.freeze({ id, bytes: new Uint8Array(makeBuffer(slotBytes)) }));
      allocations += 1;
    }
  }

  // Free slots as a stack of ids: the most recently released slot is reused first (warm in cache).
  const free: number[] = [];
  for (let id = slotCount - 1; id >= 0; id -= 1) free.push(id);
  // Per slot, the most bytes any acquire said it would use: how much of the slot has been touched.
  // First touches are slow (a page fault per 4 KiB; on VMs that reclaim idle memory, again after
  // a while), so a sized acquire prefers a slot whose touched part already covers it.
  const touchedBytes = new Array<number>(slotCount).fill(0);
  const out = new Array<boolean>(slotCount).fill(false);
  for (const slot of slots) slotIsOut.set(slot, () => out[slot.id] === true);
  const waiters: { bytes: number | undefined; resolve: (slot: StagingSlot) => void; reject: (error: unknown) => void; cleanup: () => void }[] = [];
  let closed = false;
  let acquires = 0;
  let waits = 0;
  let inUse = 0;
  let peakInUse = 0;
  let quarantinedSlots = 0;

  const checkBytesHint = (bytes: number | undefined): void => {
    if (bytes !== undefined && (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > slotBytes)) {
      throw new RuntimeError('INVALID_ARGUMENT', `bytes must be an integer in 0..${slotBytes} (the slot size)`, { bytes, slotBytes });
    }
  };

  /** Index in `free` of the slot a sized acquire gets (see tryAcquire); the top without a size. */
  const pick = (bytes: number | undefined): number => {
    const top = free.length - 1;
    if (bytes === undefined) return top;
    let fit = -1;
    let most = top;
    for (let i = top; i >= 0; i -= 1) {
      const used = touchedBytes[free[i] as number] as number;
      if (used >= bytes && (fit < 0 || used < (touchedBytes[free[fit] as number] as number))) fit = i;
      if (used > (touchedBytes[free[most] as number] as number)) most = i;
    }
    return fit >= 0 ? fit : most;
  };

  const take = (bytes?: number): StagingSlot => {
    const at = pick(bytes);
    const id = free[at] as number;
    // Remove free[at] in place (splice would allocate its result array on every acquire).
    for (let i = at; i < free.length - 1; i += 1) free[i] = free[i + 1] as number;
    free.pop();
    if (bytes !== undefined && bytes > (touchedBytes[id] as number)) touchedBytes[id] = bytes;
    out[id] = true;
    acquires += 1;
    inUse += 1;
    if (inUse > peakInUse) peakInUse = inUse;
    return slots[id] as StagingSlot;
  };

  /**
   * A wait that reached its deadline. Retryable while some slot was merely busy (another load's:
   * it comes back when that load is done); not once every slot is set aside (quarantined for
   * work an aborted load left behind): those come back only when that work settles, maybe never,
   * so a retry on this pool waits on the same stalled reader or backend.
   */
  const slotWaitTimeoutError = (slotWaitMs: number, waitedMs: number): RuntimeError => {
    const allSetAside = quarantinedSlots === slotCount;
    const why = allSetAside
      ? `every slot (${slotCount}) is set aside for a read or decode an aborted load left behind (a custom reader or decode backend that ignores the signal), back only once that settles: use another pool, and fix the reader or backend`
      : `${inUse} of ${slotCount} slots in use, ${quarantinedSlots} of them set aside for work an aborted load left behind: retry once the pool's other loads are done`;
    return new RuntimeError('POOL_WAIT_TIMEOUT', `no staging slot came within slotWaitMs (${slotWaitMs} ms): ${why}`, {
      slotCount,
      inUse,
      quarantinedSlots,
      waitedMs,
      slotWaitMs,
      retryable: !allSetAside,
    });
  };

  const pool: StagingPool = {
    slotCount,
    slotBytes,
    arena,
    get available() {
      return free.length;
    },
    tryAcquire(bytes) {
      if (closed) throw new RuntimeError('POOL_CLOSED', 'staging pool is closed');
      checkBytesHint(bytes);
      return free.length > 0 ? take(bytes) : undefined;
    },
    acquire(acquireOptions = {}) {
      try {
        checkOptionsArgument(acquireOptions);
        checkSignalArgument(acquireOptions.signal);
        checkBytesHint(acquireOptions.bytes);
        checkSlotWaitArgument(acquireOptions.slotWaitMs);
      } catch (error) {
        return Promise.reject(error);
      }
      const { signal, bytes, slotWaitMs = poolSlotWaitMs } = acquireOptions;
      if (closed) return Promise.reject(new RuntimeError('POOL_CLOSED', 'staging pool is closed'));
      if (signal?.aborted) return Promise.reject(abortedError('slot acquire aborted', signal));
      if (free.length > 0) return Promise.resolve(take(bytes));
      return new Promise<StagingSlot>((resolve, reject) => {
        let deadline: ReturnType<typeof setTimeout> | undefined;
        const leave = (): void => {
          const index = waiters.indexOf(waiter);
          if (index >= 0) waiters.splice(index, 1);
          waiter.cleanup();
        };
        const onAbort = () => {
          leave();
          reject(abortedError('slot acquire aborted', signal));
        };
        const waiter = {
          bytes,
          resolve,
          reject,
          cleanup: () => {
            signal?.removeEventListener('abort', onAbort);
            if (deadline !== undefined) clearTimeout(deadline);
          },
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        if (slotWaitMs !== undefined) {
          const since = Date.now();
          deadline = setTimeout(() => {
            // An abort already heard (its listener not yet run) wins: the load's own ABORTED.
            if (signal?.aborted === true) {
              onAbort();
              return;
            }
            leave();
            reject(slotWaitTimeoutError(slotWaitMs, Date.now() - since));
          }, slotWaitMs);
        }
        waiters.push(waiter);
      });
    },
    release(slot) {
      const id = (slot as StagingSlot | null | undefined)?.id;
      if (typeof id !== 'number' || slots[id] !== slot || !out[id]) {
        throw new RuntimeError('SLOT_NOT_OWNED', 'released a staging slot that is not out of this pool', { slotId: id });
      }
      out[id] = false;
      inUse -= 1;
      const waiter = waiters.shift();
      if (waiter) {
        // Hand the slot straight to the oldest waiter: ownership moves without touching the free list.
        waiter.cleanup();
        if (waiter.bytes !== undefined && waiter.bytes > (touchedBytes[slot.id] as number)) touchedBytes[slot.id] = waiter.bytes;
        out[slot.id] = true;
        acquires += 1;
        waits += 1; // counted when the wait ends in a slot: an aborted wait acquired nothing
        inUse += 1;
        waiter.resolve(slot);
        return;
      }
      free.push(slot.id);
    },
    async withSlot(fn, withOptions) {
      const slot = await pool.acquire(withOptions);
      try {
        return await fn(slot);
      } finally {
        pool.release(slot);
      }
    },
    stats() {
      return { slotCount, slotBytes, allocations, acquires, waits, inUse, peakInUse, quarantinedSlots };
    },
    close() {
      closed = true;
      for (const waiter of waiters.splice(0)) {
        waiter.cleanup();
        waiter.reject(new RuntimeError('POOL_CLOSED', 'staging pool closed while waiting for a slot'));
      }
    },
  };
  quarantinersOf.set(pool, (slot, settled) => {
    const id = (slot as StagingSlot | null | undefined)?.id;
    if (typeof id !== 'number' || slots[id] !== slot || !out[id]) {
      throw new RuntimeError('SLOT_NOT_OWNED', 'quarantined a staging slot that is not out of this pool', { slotId: id });
    }
    quarantinedSlots += 1;
    const release = () => {
      quarantinedSlots -= 1;
      pool.release(slot);
      if (quarantinedSlots === 0) for (const resolve of quarantineEnds.splice(0)) resolve();
    };
    void settled.then(release, release);
  });
  const quarantineEnds: (() => void)[] = [];
  quarantineEndOf.set(pool, () => (quarantinedSlots === 0 ? Promise.resolve() : new Promise<void>((resolve) => quarantineEnds.push(resolve))));
  return pool;
}
