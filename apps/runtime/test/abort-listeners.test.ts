// A long-lived caller signal (a server's shutdown signal) shared by many loads: every 'abort'
// listener the runtime adds, to that signal or to the load's own signal it passes each read, is
// gone once the load settles or the abort fires, also while a read the abort left behind stalls.
import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, type CachedModelFixture } from './fixtures.js';
import { createStallingReader } from './stalling-reader.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('abort-listeners');
});
afterAll(async () => {
  await fixture.close();
});

const LOADS = 50;
const abortListeners = (signal: unknown): number => getEventListeners(signal as AbortSignal, 'abort').length;

/** A caller's signal that already has a listener of its own (kept: not once), so "as it was" is not just 0. */
function callerSignal(): { controller: AbortController; start: number } {
  const controller = new AbortController();
  controller.signal.addEventListener('abort', () => {});
  return { controller, start: abortListeners(controller.signal) };
}

it(`${LOADS} loads sharing one caller signal leave it with the listeners it had, and no listener on their own signals`, async () => {
  const { controller, start } = callerSignal();
  const recorded = createStallingReader(async () => true); // reads at once, recording each read's signal
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.name);
  process.on('warning', onWarning);
  try {
    const { model, cache } = fixture;
    const signal = controller.signal;
    const loads = Array.from({ length: LOADS }, (_, i) => {
      if (i % 5 === 0) return loadModel(model, i % 10 === 0 ? cache : null, { reader: recorded.reader, signal, backend: createCpuDecoder() }).drain();
      const name = i % 2 === 0 ? 'embed.weight' : 'layer.0.norm';
      return loadTensor({ model, name }, { cache, reader: recorded.reader, signal, backend: createCpuDecoder() });
    });
    await Promise.all(loads);
    expect(abortListeners(signal)).toBe(start);
    expect(recorded.signals.length).toBeGreaterThanOrEqual(LOADS);
    expect(recorded.signals.filter((inner) => abortListeners(inner) > 0)).toHaveLength(0);
    await new Promise((resolve) => setImmediate(resolve)); // warnings come on a later tick
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  } finally {
    process.off('warning', onWarning);
    await recorded.reader.close();
  }
});

it('an abort mid-read: the caller signal as it was, and no listener left while the reads stall', async () => {
  const { controller, start } = callerSignal();
  const stalled = createStallingReader();
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 2 });
  try {
    const { model, cache } = fixture;
    const signal = controller.signal;
    const loads = Array.from({ length: 12 }, (_, i) =>
      i % 3 === 0
        ? loadModel(model, cache, { reader: stalled.reader, signal, backend: createCpuDecoder() }).drain()
        : loadTensor({ model, name: i % 2 === 0 ? 'embed.weight' : 'layer.0.norm' }, { cache, pool, reader: stalled.reader, signal, backend: createCpuDecoder() }),
    );
    while (stalled.inFlight() < 4) await new Promise((resolve) => setImmediate(resolve));
    controller.abort(new Error('shutdown'));
    for (const result of await Promise.allSettled(loads)) expect(result).toMatchObject({ status: 'rejected', reason: { code: 'ABORTED' } });
    expect(stalled.inFlight()).toBeGreaterThan(0); // the reads still stall, ignoring the signal
    expect(abortListeners(signal)).toBe(start);
    expect(stalled.signals.filter((inner) => abortListeners(inner) > 0)).toHaveLength(0);
  } finally {
    stalled.unstall();
    pool.close();
    await stalled.reader.close();
  }
});

it('an abort inside a reader\'s synchronous part: no listener left on the signal it was given while its read stalls', async () => {
  let controller = new AbortController(); // the reader aborts the current one
  const inner = createFileReader();
  const gates: (() => void)[] = [];
  const given: AbortSignal[] = [];
  const reader: ByteReader = {
    readExact(path, target, positionBytes, options) {
      if (options?.signal !== undefined) given.push(options.signal);
      controller.abort(new Error('client went away'));
      return new Promise<void>((resolve) => gates.push(resolve)).then(() => inner.readExact(path, target, positionBytes));
    },
    close: () => inner.close(),
  };
  const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
  try {
    const { model, cache } = fixture;
    await expect(loadTensor({ model, name: 'embed.weight' }, { cache, pool, reader, signal: controller.signal, backend: createCpuDecoder() })).rejects.toMatchObject({ code: 'ABORTED' });
    await expect(loadTensor({ model, name: 'layer.0.norm' }, { reader, signal: (controller = new AbortController()).signal })).rejects.toMatchObject({ code: 'ABORTED' });
    expect(gates).toHaveLength(2); // both reads stall
    expect(given).toHaveLength(2);
    // Before: each read's listener, added once the reader returned, stayed until the read settled.
    expect(given.map(abortListeners)).toEqual([0, 0]);
  } finally {
    gates.splice(0).forEach((open) => open());
    pool.close();
    await reader.close?.();
  }
});
