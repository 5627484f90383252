import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCpuDecoder, type DecodeBackend } from '../src/create-cpu-decoder.js';
import { createFileReader, type ByteReader } from '../src/create-file-reader.js';
import { createStagingPool } from '../src/create-staging-pool.js';
import { loadModel } from '../src/load-model.js';
import type { TensorInfo } from '@splitzip/safetensors';
import type { LoadedTensor } from '../src/types.js';
import { openCachedModel, sameBytes, type CachedModelFixture } from './fixtures.js';

// onTensor may be an async function (a loader that uploads each tensor to a device): the load
// waits for its promise before the next delivery, and a rejection fails the load as a throw does.
// Before, the promise was dropped: deliveries overlapped, and a rejection was unhandled (it killed
// a server) while the load itself succeeded.
let fixture: CachedModelFixture;
beforeAll(async () => {
  fixture = await openCachedModel('async-on-tensor');
});
afterAll(async () => {
  await fixture.close();
});

/** The next turn of the event loop (so that anything the load could run meanwhile does). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A reader and a backend that count the reads and decodes in flight. */
function countingIo(): { reader: ByteReader; backend: DecodeBackend; inFlight: () => { reads: number; decodes: number }; reads: () => number } {
  const files = createFileReader();
  const cpu = createCpuDecoder();
  let reads = 0;
  let readsStarted = 0;
  let decodes = 0;
  return {
    reader: {
      async readExact(path, target, positionBytes) {
        reads += 1;
        readsStarted += 1;
        try {
          await nextTurn();
          await files.readExact(path, target, positionBytes);
        } finally {
          reads -= 1;
        }
      },
      close: () => files.close(),
    },
    backend: {
      name: 'counting-cpu',
      async decode(payload, meta, out, options) {
        decodes += 1;
        try {
          await nextTurn();
          return await cpu.decode(payload, meta, out, options);
        } finally {
          decodes -= 1;
        }
      },
    },
    inFlight: () => ({ reads, decodes }),
    reads: () => readsStarted,
  };
}

describe('an async onTensor', () => {
  it('is awaited before the next tensor is delivered: deliveries stay one at a time, in model order', async () => {
    const events: string[] = [];
    let active = 0;
    let mostActive = 0;
    const load = loadModel(fixture.model, fixture.cache, {
      concurrency: 4,
      onTensor: async (t) => {
        active += 1;
        mostActive = Math.max(mostActive, active);
        events.push(`start ${t.name}`);
        for (let turn = 0; turn < 3; turn += 1) await nextTurn();
        events.push(`end ${t.name}`);
        active -= 1;
      },
    });
    const yielded: LoadedTensor[] = [];
    for await (const tensor of load) {
      events.push(`yield ${tensor.name}`);
      yielded.push(tensor);
    }
    const names = fixture.model.tensors.map((t) => t.name);
    expect(yielded.map((t) => t.name)).toEqual(names);
    expect(events).toEqual(names.flatMap((name) => [`start ${name}`, `end ${name}`, `yield ${name}`]));
    expect(mostActive).toBe(1);
    for (const tensor of yielded) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name) as Uint8Array)).toBe(true);
  });

  it('the reads of later tensors go on while it runs', async () => {
    const io = countingIo();
    let readsDuringFirst = -1;
    let first = true;
    await loadModel(fixture.model, fixture.cache, {
      concurrency: 2,
      reader: io.reader,
      backend: io.backend,
      onTensor: async () => {
        if (!first) return;
        first = false;
        const before = io.reads();
        // The first delivery waits until later tensors were read meanwhile.
        while (io.reads() === before) await nextTurn();
        readsDuringFirst = io.reads() - before;
      },
    }).drain();
    expect(readsDuringFirst).toBeGreaterThan(0);
    await io.reader.close();
  });

  // The same cleanup as a throw: each started read and decode settles, every slot goes back, and
  // the error is the caller's own.
  it.each(['throws', 'rejects'] as const)('that %s fails the load with its error, once nothing it started runs and every slot is back', async (how) => {
    const io = countingIo();
    const pool = createStagingPool({ slotBytes: fixture.cache.largestPayloadBytes(), slotCount: 3 });
    const failure = new Error('upload failed');
    let calls = 0;
    const load = loadModel(fixture.model, fixture.cache, {
      concurrency: 3,
      pool,
      reader: io.reader,
      backend: io.backend,
      onTensor:
        how === 'throws'
          ? () => {
              calls += 1;
              throw failure;
            }
          : async () => {
              calls += 1;
              await nextTurn();
              throw failure;
            },
    });
    const error = await load.drain().then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBe(failure);
    expect(calls).toBe(1);
    expect(load.reports).toHaveLength(1);
    expect(io.inFlight()).toEqual({ reads: 0, decodes: 0 });
    expect(pool.stats().inUse).toBe(0);
    expect(pool.available).toBe(pool.slotCount);
    pool.close();
    await io.reader.close();
  });

  it('a thenable that is not a Promise is awaited too', async () => {
    const order: string[] = [];
    await loadModel(fixture.model, fixture.cache, {
      filter: (t) => t.name === 'embed.weight' || t.name === 'lm_head',
      onTensor: (t) => ({
        then(resolve: () => void) {
          setImmediate(() => {
            order.push(`settled ${t.name}`);
            resolve();
          });
        },
      }),
    }).drain();
    expect(order).toEqual(['settled embed.weight', 'settled lm_head']);
  });
});

describe('an async filter', () => {
  it('is INVALID_ARGUMENT naming the tensor (a promise is truthy: every tensor was loaded)', async () => {
    const delivered: string[] = [];
    const error = await loadModel(fixture.model, fixture.cache, {
      filter: async (t: TensorInfo) => t.name === 'lm_head',
      onTensor: (t: LoadedTensor) => void delivered.push(t.name),
    } as never)
      .drain()
      .catch((reason: unknown) => reason);
    const first = fixture.model.tensors[0]?.name as string;
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'filter', tensor: first } });
    expect((error as Error).message).toContain(first);
    expect(delivered).toEqual([]);
  });

  it('one that rejects leaves no unhandled rejection behind', async () => {
    const error = await loadModel(fixture.model, fixture.cache, {
      filter: async () => {
        throw new Error('filter failed');
      },
    } as never)
      .drain()
      .catch((reason: unknown) => reason);
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'filter' } });
    // A turn for an unhandled rejection to be reported (vitest fails the run on one).
    await new Promise((resolve) => setTimeout(resolve, 20));
  });

  // `instanceof Promise` missed a promise of another realm (a vm context, an iframe's bundle), whose
  // rejection then went unhandled.
  it('one that rejects with a promise of another realm leaves no unhandled rejection either', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const error = await loadModel(fixture.model, fixture.cache, {
        filter: () => runInNewContext('Promise.reject(new Error("filter of another realm failed"))') as unknown,
      } as never)
        .drain()
        .catch((reason: unknown) => reason);
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'filter' } });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
