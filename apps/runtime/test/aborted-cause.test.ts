import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';

// ABORTED carries the signal's reason as its standard `cause` (a caller's `error.cause`), and in
// `details.reason` as before.
let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('aborted-cause');
});
afterAll(async () => {
  await fixture.close();
});

describe('ABORTED and the signal reason', () => {
  it("the reason in the message, bounded: a timeout signal's, a huge one", async () => {
    const timedOut = AbortSignal.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
    const error = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, signal: timedOut }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ABORTED' });
    expect((error as Error).message).toContain("(the signal's reason: TimeoutError: The operation was aborted due to timeout)");
    const huge = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { signal: AbortSignal.abort(new Error('x'.repeat(1_000_000))) }).catch((e: unknown) => e);
    expect((huge as Error).message.length).toBeLessThan(200);
  });

  it('a reason without a message: its name alone, not "Error: "', async () => {
    const messageOf = async (reason: unknown) =>
      ((await loadTensor({ model: fixture.model, name: 'embed.weight' }, { signal: AbortSignal.abort(reason) }).catch((e: unknown) => e)) as Error).message;
    expect(await messageOf(new Error())).toMatch(/ \(the signal's reason: Error\)$/);
    expect(await messageOf(new RangeError(''))).toMatch(/ \(the signal's reason: RangeError\)$/);
  });

  it('a signal aborted before the load: loadModel and loadTensor', async () => {
    const reason = new Error('client went away');
    const signal = AbortSignal.abort(reason);
    const fromModel = await loadModel(fixture.model, fixture.cache, { signal }).drain().catch((error: unknown) => error);
    expect(fromModel).toMatchObject({ code: 'ABORTED', details: { reason } });
    expect((fromModel as Error).cause).toBe(reason);
    // In the message too: a loader logging `code: message` sees whose abort it was.
    expect((fromModel as Error).message).toMatch(/ \(the signal's reason: Error: client went away\)$/);
    const fromTensor = await loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, signal }).catch((error: unknown) => error);
    expect(fromTensor).toMatchObject({ code: 'ABORTED', details: { reason } });
    expect((fromTensor as Error).cause).toBe(reason);
  });

  it('aborted mid-load, and a wait for a staging slot', async () => {
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const midLoad = await loadModel(fixture.model, fixture.cache, { signal: controller.signal, onTensor: () => controller.abort(reason) })
      .drain()
      .catch((error: unknown) => error);
    expect(midLoad).toMatchObject({ code: 'ABORTED' });
    expect((midLoad as Error).cause).toBe(reason);
    const pool = createStagingPool({ slotBytes: 256, slotCount: 1 });
    const held = await pool.acquire();
    const waiting = new AbortController();
    const acquiring = pool.acquire({ signal: waiting.signal }).catch((error: unknown) => error);
    waiting.abort('timed out');
    const error = await acquiring;
    expect(error).toMatchObject({ code: 'ABORTED', details: { reason: 'timed out' } });
    expect((error as Error).cause).toBe('timed out');
    expect((error as Error).message).toBe('slot acquire aborted (the signal\'s reason: string "timed out")');
    pool.release(held);
    pool.close?.();
  });
});
