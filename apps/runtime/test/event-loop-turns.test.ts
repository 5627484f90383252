import { readSync, openSync, closeSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '@splitzip/codec';
import type { ByteReader } from '../src/create-file-reader.js';
import type { DecodeBackend } from '../src/create-cpu-decoder.js';
import { createPacedReader } from '../src/create-paced-reader.js';
import { loadModel } from '../src/load-model.js';
import { EVENT_LOOP_TURN_BUDGET_MS } from '../src/take-turn-if-due.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

// A load whose every step settles at once (synchronous reads, decodes on this thread) used to run
// as one chain of microtasks: the host's timers, I/O and setImmediate callbacks waited for its end.
// These loads do at least EVENT_LOOP_TURN_BUDGET_MS of work per tensor (a reader or backend that
// spins), so each must let the event loop turn many times; the bounds are far below what the
// budget gives (about one turn per tensor), and no timing is asserted.

/** Spins the calling thread for `ms` (a step of work that takes at least that long). */
function spin(ms: number): void {
  const endMs = performance.now() + ms;
  while (performance.now() < endMs) {
    // busy: the work a large read or decode does on this thread
  }
}

/** A reader whose reads are synchronous and each take at least the turn budget. */
function slowSyncReader(): ByteReader {
  return {
    readExact(path, target, positionBytes) {
      const fd = openSync(path, 'r');
      try {
        for (let done = 0; done < target.byteLength; ) done += readSync(fd, target, done, target.byteLength - done, positionBytes + done);
      } finally {
        closeSync(fd);
      }
      spin(EVENT_LOOP_TURN_BUDGET_MS);
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
}

/** Counts event-loop turns (setImmediate callbacks) until stopped. */
function countTurns(): { stop: () => number } {
  let turns = 0;
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    turns += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop: () => {
      stopped = true;
      return turns;
    },
  };
}

const TENSORS = 16;
let fixture: CachedModelFixture;

beforeAll(async () => {
  fixture = await openCachedModel(
    'turns',
    tunedWeights(
      Array.from({ length: TENSORS }, (_, k) => `t${k}`),
      300,
    ),
  );
});

afterAll(async () => {
  await fixture.close();
});

describe('a load lets the event loop turn', () => {
  it('raw, through a reader whose reads settle at once', async () => {
    const counter = countTurns();
    const got: boolean[] = [];
    await loadModel(fixture.model, null, {
      reader: slowSyncReader(),
      onTensor: (t) => got.push(sameBytes(t.data, fixture.raw.get(t.name) as Uint8Array)),
    }).drain();
    const turns = counter.stop();
    expect(got).toEqual(Array.from({ length: TENSORS }, () => true));
    expect(turns).toBeGreaterThanOrEqual(TENSORS / 4);
  });

  it('from the cache, with blobs read synchronously and decoded on this thread', async () => {
    let decodes = 0;
    // Decodes here, synchronously, each at least the turn budget long.
    const backend: DecodeBackend = {
      name: 'slow-inline',
      decode(payload, meta, out) {
        decode(payload.subarray(0, meta.compBytes), out.subarray(0, meta.elementCount), { verify: true });
        decodes += 1;
        spin(EVENT_LOOP_TURN_BUDGET_MS);
      },
    };
    const counter = countTurns();
    const got: boolean[] = [];
    const load = loadModel(fixture.model, fixture.cache, {
      backend,
      refresh: false,
      onTensor: (t) => got.push(t.source === 'cache' && sameBytes(t.data, fixture.raw.get(t.name) as Uint8Array)),
    });
    await load.drain();
    const turns = counter.stop();
    expect(got).toEqual(Array.from({ length: TENSORS }, () => true));
    expect(decodes).toBe(TENSORS);
    expect(turns).toBeGreaterThanOrEqual(TENSORS / 4);
  });

  it('through the pacing reader, once the link is behind (every deadline passed)', async () => {
    const { shardPath, slice } = fixture.model.tensors[0]!;
    // A link far faster than the reads: each piece's deadline has passed when it is asked for.
    const paced = createPacedReader(slowSyncReader(), { bytesPerSecond: 1e15, burstBytes: 0, chunkBytes: 512 });
    const target = new Uint8Array(slice.sizeBytes);
    const pieces = Math.ceil(slice.sizeBytes / 512);
    const counter = countTurns();
    await paced.readExact(shardPath, target, slice.offsetBytes);
    const turns = counter.stop();
    expect(sameBytes(target, fixture.raw.get(fixture.model.tensors[0]!.name) as Uint8Array)).toBe(true);
    expect(pieces).toBeGreaterThanOrEqual(8);
    expect(turns).toBeGreaterThanOrEqual(pieces / 4);
  });
});
