import { describe, expect, it } from 'vitest';
import { createStagingPool, releaseStagingSlotWhenSettled, STAGING_ALIGN_BYTES, type StagingSlot } from '../src/create-staging-pool.js';
import { isRuntimeError } from '../src/errors.js';

describe('createStagingPool', () => {
  it('rounds slots up to the alignment and places each at an aligned offset', () => {
    const pool = createStagingPool({ slotBytes: 1000, slotCount: 3 });
    expect(pool.slotBytes).toBe(1024);
    const slots = [pool.tryAcquire(), pool.tryAcquire(), pool.tryAcquire()] as StagingSlot[];
    for (const slot of slots) {
      expect(slot.bytes.byteLength).toBe(1024);
      expect(slot.bytes.byteOffset % STAGING_ALIGN_BYTES).toBe(0);
    }
    expect(new Set(slots.map((s) => s.id)).size).toBe(3);
    // Slots never overlap.
    slots[0]!.bytes.fill(1);
    slots[1]!.bytes.fill(2);
    slots[2]!.bytes.fill(3);
    expect(slots[0]!.bytes.every((b) => b === 1)).toBe(true);
    expect(slots[1]!.bytes.every((b) => b === 2)).toBe(true);
    expect(pool.tryAcquire()).toBeUndefined();
  });

  it('gives a zero-byte request one aligned unit', () => {
    expect(createStagingPool({ slotBytes: 0, slotCount: 1 }).slotBytes).toBe(STAGING_ALIGN_BYTES);
  });

  it('rejects bad sizes with INVALID_ARGUMENT', () => {
    for (const options of [
      { slotBytes: -1, slotCount: 1 },
      { slotBytes: 1.5, slotCount: 1 },
      { slotBytes: 10, slotCount: 0 },
      { slotBytes: 10, slotCount: 100000 },
      { slotBytes: 2 ** 40, slotCount: 1 },
    ]) {
      expect(() => createStagingPool(options)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });

  it('reuses the same slot objects: nothing is allocated after creation', async () => {
    const pool = createStagingPool({ slotBytes: 4096, slotCount: 2 });
    const seen = new Set<Uint8Array>();
    for (let i = 0; i < 100; i += 1) {
      await pool.withSlot(async (slot) => {
        seen.add(slot.bytes);
        await Promise.resolve();
      });
    }
    expect(seen.size).toBeLessThanOrEqual(2);
    const stats = pool.stats();
    expect(stats.allocations).toBe(1);
    expect(stats.acquires).toBe(100);
    expect(stats.inUse).toBe(0);
  });

  it('gives a sized acquire the free slot whose touched bytes cover it most tightly', async () => {
    const pool = createStagingPool({ slotBytes: 4096, slotCount: 4 });
    // Touch the slots to 4096, 1024, 256 and 0 bytes (a slot's record is the most asked of it).
    const a = pool.tryAcquire(4096)!;
    const b = pool.tryAcquire(1024)!;
    const c = pool.tryAcquire(256)!;
    const d = pool.tryAcquire()!;
    for (const slot of [d, c, b, a]) pool.release(slot); // free, most recent last: a
    // 1000 bytes: b (1024) covers it more tightly than a (4096), though a was released last.
    const first = pool.tryAcquire(1000)!;
    expect(first.id).toBe(b.id);
    // 3000 bytes: only a covers it.
    const second = pool.tryAcquire(3000)!;
    expect(second.id).toBe(a.id);
    // 300 bytes, neither a nor b free: nothing left covers it, so the most-touched free slot (c, 256).
    const third = pool.tryAcquire(300)!;
    expect(third.id).toBe(c.id);
    // c now counts as touched to 300; 0 bytes is covered by both c and d: d (0) is the tighter fit.
    pool.release(third);
    expect(pool.tryAcquire(0)!.id).toBe(d.id);
    // Without a size: the most recently released slot, as before.
    expect(pool.tryAcquire()!.id).toBe(c.id);
    expect(pool.tryAcquire(1)).toBeUndefined();
    // The record follows waiters too: a waiter asking 2048 bytes gets the next slot released.
    const waiting = pool.acquire({ bytes: 2048 });
    pool.release(first);
    expect((await waiting).id).toBe(b.id);
    pool.release(b);
    pool.release(second);
    // b (2048) now fits 1500 more tightly than a (4096); withSlot takes the same hint.
    expect(await pool.withSlot((slot) => slot.id, { bytes: 1500 })).toBe(b.id);
    expect(pool.tryAcquire(1500)!.id).toBe(b.id);
  });

  it('breaks ties between equally touched slots by recency', () => {
    const pool = createStagingPool({ slotBytes: 1024, slotCount: 3 });
    const slots = [pool.tryAcquire(512)!, pool.tryAcquire(512)!, pool.tryAcquire(512)!];
    pool.release(slots[2]!);
    pool.release(slots[0]!);
    pool.release(slots[1]!);
    expect(pool.tryAcquire(100)!.id).toBe(slots[1]!.id);
    expect(pool.tryAcquire(100)!.id).toBe(slots[0]!.id);
  });

  it('rejects a size hint that is not an integer in 0..slotBytes with INVALID_ARGUMENT', async () => {
    const pool = createStagingPool({ slotBytes: 1024, slotCount: 1 });
    for (const bytes of [-1, 1.5, 1025, Number.NaN]) {
      expect(() => pool.tryAcquire(bytes)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
      await expect(pool.acquire({ bytes })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    expect(pool.available).toBe(1);
  });

  it('makes acquirers wait in FIFO order and hands released slots over', async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const first = await pool.acquire();
    const order: number[] = [];
    const a = pool.acquire().then((slot) => {
      order.push(1);
      return slot;
    });
    const b = pool.acquire().then((slot) => {
      order.push(2);
      return slot;
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(order).toEqual([]);
    pool.release(first);
    const slotA = await a;
    expect(slotA).toBe(first);
    pool.release(slotA);
    const slotB = await b;
    expect(slotB).toBe(first);
    expect(order).toEqual([1, 2]);
    expect(pool.stats().waits).toBe(2);
    expect(pool.stats().peakInUse).toBe(1);
    pool.release(slotB);
  });

  it('refuses a double release and a foreign slot with SLOT_NOT_OWNED', () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const other = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const slot = pool.tryAcquire() as StagingSlot;
    const foreign = other.tryAcquire() as StagingSlot;
    expect(() => pool.release(foreign)).toThrow(expect.objectContaining({ code: 'SLOT_NOT_OWNED' }));
    pool.release(slot);
    let caught: unknown;
    try {
      pool.release(slot);
    } catch (error) {
      caught = error;
    }
    expect(isRuntimeError(caught, 'SLOT_NOT_OWNED')).toBe(true);
    // A fake slot with a valid id is not this pool's either.
    expect(() => pool.release({ id: 0, bytes: new Uint8Array(256) })).toThrow(expect.objectContaining({ code: 'SLOT_NOT_OWNED' }));
    // Nor is nothing at all (a TypeError from inside the pool before).
    for (const nothing of [null, undefined]) expect(() => pool.release(nothing as never)).toThrow(expect.objectContaining({ code: 'SLOT_NOT_OWNED' }));
  });

  it('refuses missing options with INVALID_ARGUMENT', () => {
    for (const options of [undefined, null, 7]) {
      expect(() => createStagingPool(options as never)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    }
  });

  it('releases the slot when the scoped callback throws', async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    await expect(
      pool.withSlot(() => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(pool.available).toBe(1);
  });

  it('aborts a waiting acquire and rejects waiters on close', async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const held = pool.tryAcquire() as StagingSlot;
    const controller = new AbortController();
    const aborted = pool.acquire({ signal: controller.signal });
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ code: 'ABORTED' });
    const waiting = pool.acquire();
    pool.close();
    await expect(waiting).rejects.toMatchObject({ code: 'POOL_CLOSED' });
    await expect(pool.acquire()).rejects.toMatchObject({ code: 'POOL_CLOSED' });
    // The aborted waiter did not steal the slot: releasing still works.
    pool.release(held);
    // Waits that ended without a slot are not counted as acquires that waited.
    expect(pool.stats()).toMatchObject({ acquires: 1, waits: 0 });
  });

  it('a slot released once a read settles is counted quarantined until then, and goes to the next waiter', async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const slot = pool.tryAcquire() as StagingSlot;
    let settle!: () => void;
    releaseStagingSlotWhenSettled(pool, slot, new Promise<void>((resolve) => (settle = resolve)));
    expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
    const waiting = pool.acquire();
    settle();
    expect(await waiting).toBe(slot);
    expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 0, waits: 1 });
    pool.release(slot);
    // Not out: refused as release refuses it, and not counted.
    expect(() => releaseStagingSlotWhenSettled(pool, slot, Promise.resolve())).toThrow(expect.objectContaining({ code: 'SLOT_NOT_OWNED' }));
    expect(pool.stats()).toMatchObject({ inUse: 0, quarantinedSlots: 0 });
  });

  it("a caller-made pool whose release throws, given a slot once its read settles, leaves no unhandled rejection", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const inner = createStagingPool({ slotBytes: 256, slotCount: 1 });
      const slot = inner.tryAcquire() as StagingSlot;
      let releases = 0;
      // Not createStagingPool's own object: released as it is, once the read settles.
      const callerPool = {
        ...inner,
        release: () => {
          releases += 1;
          throw new Error('caller pool refuses');
        },
      };
      releaseStagingSlotWhenSettled(callerPool as never, slot, Promise.reject(new Error('read failed')));
      for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(releases).toBe(1);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('backs slots with SharedArrayBuffer when asked', () => {
    const pool = createStagingPool({ slotBytes: 300, slotCount: 2, shared: true });
    const slot = pool.tryAcquire() as StagingSlot;
    expect(slot.bytes.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  it('puts the slots in a codec arena unless told not to, or unless malloc gives huge pages', () => {
    const saved = process.env.GLIBC_TUNABLES;
    try {
      delete process.env.GLIBC_TUNABLES;
      expect(createStagingPool({ slotBytes: 4096, slotCount: 2 }).arena).toBeDefined();
      expect(createStagingPool({ slotBytes: 4096, slotCount: 2, shared: true, threads: 2 }).arena).toBeDefined();
      const plain = createStagingPool({ slotBytes: 4096, slotCount: 2, shared: true, threads: 2, codecArena: false });
      expect(plain.arena).toBeUndefined();
      expect((plain.tryAcquire() as StagingSlot).bytes.buffer).toBeInstanceOf(SharedArrayBuffer);
      // The process's malloc asked for huge pages: plain buffers (which get them) by default.
      process.env.GLIBC_TUNABLES = 'glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1';
      expect(createStagingPool({ slotBytes: 4096, slotCount: 2, shared: true, threads: 2 }).arena).toBeUndefined();
      expect(createStagingPool({ slotBytes: 4096, slotCount: 2 }).arena).toBeUndefined();
      expect(createStagingPool({ slotBytes: 4096, slotCount: 2, codecArena: true }).arena).toBeDefined();
    } finally {
      if (saved === undefined) delete process.env.GLIBC_TUNABLES;
      else process.env.GLIBC_TUNABLES = saved;
    }
  });
});

