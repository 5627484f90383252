// slotWaitMs: an opt-in deadline on a staging pool's waits. A slot set aside for a read or decode an
// aborted load left behind comes back only when that settles, which may be never: without a
// deadline, once every slot is set aside, later loads waited for good. A slot that does come back
// in time is still served (the documented wait), and the load's abort still wins.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { createStagingPool, MAX_SLOT_WAIT_MS, releaseStagingSlotWhenSettled, type StagingSlot } from '../src/create-staging-pool.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, tunedWeights, type CachedModelFixture } from './fixtures.js';

const never = new Promise<never>(() => undefined);

afterEach(() => {
  vi.useRealTimers();
});

describe('a staging pool with slotWaitMs', () => {
  it('every slot set aside: a wait already begun and a new acquire fail POOL_WAIT_TIMEOUT, not retryable', { timeout: 10_000 }, async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 2, slotWaitMs: 5 });
    const a = pool.tryAcquire() as StagingSlot;
    const b = pool.tryAcquire() as StagingSlot;
    const waiting = pool.acquire();
    releaseStagingSlotWhenSettled(pool, a, never);
    releaseStagingSlotWhenSettled(pool, b, never);
    const timedOut = {
      code: 'POOL_WAIT_TIMEOUT',
      retryable: false,
      details: { slotCount: 2, inUse: 2, quarantinedSlots: 2, slotWaitMs: 5, waitedMs: expect.any(Number) },
    };
    await expect(waiting).rejects.toMatchObject(timedOut);
    await expect(pool.acquire()).rejects.toMatchObject(timedOut);
    await expect(pool.acquire()).rejects.toThrow(/every slot \(2\) is set aside/);
    // The waits left the queue: nothing was acquired, and no waiter is left to hand a slot to.
    expect(pool.stats()).toMatchObject({ acquires: 2, waits: 0, inUse: 2, quarantinedSlots: 2 });
  });

  it("a slot merely busy (another caller's): POOL_WAIT_TIMEOUT, retryable; acquire's own slotWaitMs overrides the pool's", { timeout: 10_000 }, async () => {
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const held = pool.tryAcquire() as StagingSlot;
    await expect(pool.acquire({ slotWaitMs: 5 })).rejects.toMatchObject({
      code: 'POOL_WAIT_TIMEOUT',
      retryable: true,
      details: { slotCount: 1, inUse: 1, quarantinedSlots: 0, slotWaitMs: 5 },
    });
    pool.release(held);
    expect(pool.available).toBe(1);
  });

  it('a set-aside slot that comes back before the deadline is served, and its deadline is cleared', async () => {
    vi.useFakeTimers();
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1, slotWaitMs: 50 });
    const slot = pool.tryAcquire() as StagingSlot;
    let settle!: () => void;
    releaseStagingSlotWhenSettled(pool, slot, new Promise<void>((resolve) => (settle = resolve)));
    const waiting = pool.acquire();
    expect(vi.getTimerCount()).toBe(1);
    settle();
    expect(await waiting).toBe(slot);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 0, waits: 1 });
    pool.release(slot);
  });

  it('abort wins over the deadline: aborted before the acquire, or while it waits', async () => {
    vi.useFakeTimers();
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1, slotWaitMs: 20 });
    const held = pool.tryAcquire() as StagingSlot;
    releaseStagingSlotWhenSettled(pool, held, never);
    await expect(pool.acquire({ signal: AbortSignal.abort(new Error('gone')), slotWaitMs: 1 })).rejects.toMatchObject({ code: 'ABORTED' });

    const controller = new AbortController();
    const waiting = pool.acquire({ signal: controller.signal });
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toMatchObject({ code: 'ABORTED' });
    expect(vi.getTimerCount()).toBe(0);

    expect(pool.stats()).toMatchObject({ waits: 0, inUse: 1, quarantinedSlots: 1 });
  });

  it('refuses slotWaitMs that is not a number of milliseconds in (0, MAX_SLOT_WAIT_MS]', async () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, MAX_SLOT_WAIT_MS + 1, '5', null]) {
      const refused = { code: 'INVALID_ARGUMENT', details: expect.objectContaining({ option: 'slotWaitMs' }) };
      expect(() => createStagingPool({ slotBytes: 256, slotCount: 1, slotWaitMs: bad as number })).toThrow(expect.objectContaining(refused));
      await expect(createStagingPool({ slotBytes: 256, slotCount: 1 }).acquire({ slotWaitMs: bad as number })).rejects.toMatchObject(refused);
    }
    expect(() => createStagingPool({ slotBytes: 256, slotCount: 1, slotWaitMs: 0 })).toThrow(
      `slotWaitMs must be a number of milliseconds > 0 and <= ${MAX_SLOT_WAIT_MS} (MAX_SLOT_WAIT_MS, Node's timer limit), or left out to wait with no deadline, got 0`,
    );
    expect(createStagingPool({ slotBytes: 256, slotCount: 1, slotWaitMs: MAX_SLOT_WAIT_MS }).slotCount).toBe(1);
  });
});

describe('loads on a pool with slotWaitMs', () => {
  let fixture: CachedModelFixture;
  beforeAll(async () => {
    fixture = await openCachedModel('slot-wait-deadline', tunedWeights(['a', 'b'], 97));
  });
  afterAll(async () => {
    await fixture.close();
  });

  it("a load after an aborted one set the pool's last slot aside fails POOL_WAIT_TIMEOUT, not waits for good", { timeout: 20_000 }, async () => {
    const cpu = createCpuDecoder();
    let calls = 0;
    const backend: DecodeBackend = {
      name: 'hung',
      decode: () => {
        calls += 1;
        return never; // ignores every abort: its slot is set aside for good
      },
    };
    const pool = fixture.cache.createStagingPool({ slotCount: 1, slotWaitMs: 5 });
    const controller = new AbortController();
    try {
      const loading = loadTensor({ model: fixture.model, name: 'a.weight' }, { cache: fixture.cache, pool, backend, signal: controller.signal });
      for (let k = 0; k < 2000 && calls === 0; k++) await new Promise<void>((resolve) => setTimeout(resolve, 5));
      controller.abort(new Error('client went away'));
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
      expect(pool.stats()).toMatchObject({ inUse: 1, quarantinedSlots: 1 });
      const later = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend: cpu });
      await expect(later).rejects.toMatchObject({ code: 'POOL_WAIT_TIMEOUT', details: expect.objectContaining({ slotCount: 1, quarantinedSlots: 1 }) });
    } finally {
      pool.close();
    }
  });

  // The decode threads' path (readDecode) takes its slots from the pool too: the timeout is the
  // caller's pool's answer, passed on as POOL_CLOSED is, not a decode failure served raw.
  it('a readDecode backend whose slot wait times out: the load fails POOL_WAIT_TIMEOUT', { timeout: 20_000 }, async () => {
    const cpu = createCpuDecoder();
    const backend: DecodeBackend = {
      name: 'reads-on-thread',
      inlineMaxValues: 0,
      decode: (payload, meta, out, options) => cpu.decode(payload, meta, out, options),
      readDecode: async (request) => {
        const lease = await request.staging.take();
        lease.release();
        throw new Error('not reached: the pool has no slot to give');
      },
    };
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1, shared: true, slotWaitMs: 5 });
    const held = pool.tryAcquire() as StagingSlot;
    releaseStagingSlotWhenSettled(pool, held, never);
    try {
      const loading = loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, pool, backend });
      await expect(loading).rejects.toMatchObject({ code: 'POOL_WAIT_TIMEOUT', details: expect.objectContaining({ quarantinedSlots: 1 }) });
    } finally {
      pool.close();
    }
  });

  it('cache.createStagingPool refuses a bad slotWaitMs', () => {
    expect(() => fixture.cache.createStagingPool({ slotCount: 1, slotWaitMs: -1 })).toThrow(/^slotWaitMs must be a number of milliseconds > 0 .*, got -1$/);
  });
});
