// A read that stalls (a hung network mount, a remote adapter on a dead connection) and ignores the
// signal: the load's abort still ends loadTensor and loadModel at once, on the cache path (a staged
// payload) and the raw path, and memory that read may write into is kept out of reuse until it
// settles. Every read is passed the load's signal, and the built-in file reader honours it.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCpuDecoder } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createPacedReader } from '../src/create-paced-reader.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { isReadError } from '../src/read-error.js';
import { makeTempDir, openCachedModel, type CachedModelFixture } from './fixtures.js';
import { createStallingReader, expectSlotHeldUntilUnstalled, type StallingReader } from './stalling-reader.js';

let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('stalled-read-abort');
});
afterAll(async () => {
  await fixture.close();
});

/** A reader whose reads never settle until `unstall()`, ignoring the signal they are given. */
const createStalledReader = (): StallingReader => createStallingReader();

/** Aborts `controller` once `reads()` reads have been asked (the load is stalled in them). */
async function abortWhenStalled(controller: AbortController, reads: () => number): Promise<void> {
  while (reads() === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  controller.abort(new Error('client went away'));
}

describe('a stalled read that ignores the signal', () => {
  it('loadTensor from the cache: ABORTED at once; the staging slot is quarantined until the read settles', async () => {
    const stalled = createStalledReader();
    const pool = createStagingPool({ slotBytes: 64 * 1024, slotCount: 1 });
    const controller = new AbortController();
    try {
      const loading = loadTensor({ model: fixture.model, name: 'embed.weight' }, { cache: fixture.cache, reader: stalled.reader, pool, backend: createCpuDecoder(), signal: controller.signal });
      await abortWhenStalled(controller, stalled.inFlight);
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED', details: expect.objectContaining({ tensor: 'embed.weight' }) });
      expect(stalled.signals.length).toBeGreaterThan(0);
      expect(stalled.signals.every((signal) => signal instanceof AbortSignal && signal.aborted)).toBe(true);
      expect(stalled.inFlight()).toBe(1);
      await expectSlotHeldUntilUnstalled(pool, stalled);
    } finally {
      stalled.unstall();
      pool.close();
      await stalled.reader.close();
    }
  });

  it.each([
    ['loadTensor raw', (reader: ByteReader, signal: AbortSignal) => loadTensor({ model: fixture.model, name: 'layer.0.norm' }, { reader, signal })],
    ['loadModel with a cache', (reader: ByteReader, signal: AbortSignal) => loadModel(fixture.model, fixture.cache, { reader, signal, backend: createCpuDecoder() }).drain()],
    ['loadModel raw', (reader: ByteReader, signal: AbortSignal) => loadModel(fixture.model, null, { reader, signal }).drain()],
  ] as const)('%s: ABORTED at once', async (_label, load) => {
    const stalled = createStalledReader();
    const controller = new AbortController();
    try {
      const loading = Promise.resolve(load(stalled.reader, controller.signal));
      await abortWhenStalled(controller, stalled.inFlight);
      await expect(loading).rejects.toMatchObject({ code: 'ABORTED' });
      expect(stalled.inFlight()).toBeGreaterThan(0);
    } finally {
      stalled.unstall();
      await stalled.reader.close();
    }
  });
});

describe('the signal reaches the readers', () => {
  it('createFileReader and createPacedReader stop between pieces: ReadError ABORTED', async () => {
    const { dir, cleanup } = await makeTempDir('reader-signal');
    const path = join(dir, 'file');
    await writeFile(path, new Uint8Array(4096).fill(7));
    const reason = new Error('stop');
    const signal = AbortSignal.abort(reason);
    const files = createFileReader();
    const paced = createPacedReader(createFileReader(), { bytesPerSecond: 1e9 });
    try {
      for (const reader of [files, paced]) {
        const target = new Uint8Array(4096);
        const error = await reader.readExact(path, target, 0, { signal }).catch((thrown: unknown) => thrown);
        expect(isReadError(error, 'ABORTED')).toBe(true);
        expect((error as Error).cause).toBe(reason);
        expect(target.every((byte) => byte === 0)).toBe(true);
        // Not aborted: the read is made.
        await reader.readExact(path, target, 0, { signal: new AbortController().signal });
        expect(target.every((byte) => byte === 7)).toBe(true);
      }
    } finally {
      await files.close();
      await paced.close();
      await cleanup();
    }
  });
});
